/* Draws every [data-plotly-figure] element with Plotly. The attribute names the id of a json_script element that
   holds the figure ({data, layout, config}) built in Python (apps/<app>/charts.py). No build step. */
(function () {
  "use strict";

  function render(root) {
    if (!window.Plotly) {
      return;
    }
    var scope = root && root.querySelectorAll ? root : document;
    var elements = Array.prototype.slice.call(scope.querySelectorAll("[data-plotly-figure]"));
    if (scope.matches && scope.matches("[data-plotly-figure]")) {
      elements.push(scope);
    }
    elements.forEach(function (element) {
      var source = document.getElementById(element.getAttribute("data-plotly-figure"));
      if (!source) {
        return;
      }
      var figure = JSON.parse(source.textContent);
      var config = Object.assign({ responsive: true, displaylogo: false }, figure.config || {});
      window.Plotly.newPlot(element, figure.data || [], figure.layout || {}, config);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { render(document); });
  } else {
    render(document);
  }
  document.addEventListener("htmx:afterSwap", function (event) { render(event.target); });
  window.RackpilotCharts = { render: render };
})();
