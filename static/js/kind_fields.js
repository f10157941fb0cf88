// Forms whose fields depend on one choice (a fault's kind, a benchmark's suite): a form with data-kind-field="NAME"
// shows each element marked data-shown-for="a b c" only while its NAME field holds one of those values. Hidden fields
// keep their values (a required one still validates); the server ignores the fields the choice does not take, and
// without JavaScript every field shows.
(function () {
  function update(form) {
    const chosen = form.elements[form.dataset.kindField];
    if (!chosen) return;
    form.querySelectorAll("[data-shown-for]").forEach(function (element) {
      const shown = element.dataset.shownFor.split(" ").indexOf(chosen.value) !== -1;
      element.hidden = !shown;
    });
  }
  document.querySelectorAll("form[data-kind-field]").forEach(function (form) {
    update(form);
    form.addEventListener("change", function (event) {
      if (event.target.name === form.dataset.kindField) update(form);
    });
  });
})();
