// Forms whose fields depend on a choice (a fault's kind, a benchmark's suite, which nodes: a rack, a tag or names): a
// form with data-kind-field="NAME" shows each element marked data-shown-for="a b c" only while its NAME field holds one
// of those values. An element that follows another choice of the same form names it: data-kind-field="OTHER" on the
// element itself. Hidden fields keep their values (a required one still validates); the server ignores the fields the
// choice does not take, and without JavaScript every field shows.
(function () {
  function update(form) {
    form.querySelectorAll("[data-shown-for]").forEach(function (element) {
      const chosen = form.elements[element.dataset.kindField || form.dataset.kindField];
      if (!chosen) return;
      element.hidden = element.dataset.shownFor.split(" ").indexOf(chosen.value) === -1;
    });
  }
  document.querySelectorAll("form[data-kind-field]").forEach(function (form) {
    update(form);
    form.addEventListener("change", function () {
      update(form);
    });
  });
})();
