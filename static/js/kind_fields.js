// Forms whose fields depend on one choice (a fault's kind, a benchmark's suite): a form with data-kind-field="NAME"
// shows each element marked data-shown-for="a b c" only while its NAME field holds one of those values, and disables
// the inputs it hides so they are not sent. Without JavaScript every field shows and the server ignores the others.
(function () {
  function update(form) {
    const chosen = form.elements[form.dataset.kindField];
    if (!chosen) return;
    form.querySelectorAll("[data-shown-for]").forEach(function (element) {
      const shown = element.dataset.shownFor.split(" ").indexOf(chosen.value) !== -1;
      element.hidden = !shown;
      element.querySelectorAll("input, select, textarea").forEach(function (input) { input.disabled = !shown; });
    });
  }
  document.querySelectorAll("form[data-kind-field]").forEach(function (form) {
    update(form);
    form.addEventListener("change", function (event) {
      if (event.target.name === form.dataset.kindField) update(form);
    });
  });
})();
