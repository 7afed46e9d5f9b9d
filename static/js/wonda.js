// Warn before leaving a form with unsaved changes (forms opt in with data-warn-unsaved).
(function () {
  let dirty = false;
  document.addEventListener("input", (event) => {
    if (event.target.closest("form[data-warn-unsaved]")) dirty = true;
  });
  document.addEventListener("submit", () => { dirty = false; });
  window.addEventListener("beforeunload", (event) => {
    if (dirty) { event.preventDefault(); event.returnValue = ""; }
  });
})();

// List inputs (traits, skills, knowledge...): one input per item; "+ Add" clones the row template.
(function () {
  function changed(container) {
    // Mark the form dirty (unsaved-changes warning) and let htmx re-validate the field.
    container.dispatchEvent(new Event("input", { bubbles: true }));
    container.dispatchEvent(new Event("change", { bubbles: true }));
  }
  document.addEventListener("click", (event) => {
    const add = event.target.closest("[data-list-add]");
    if (add) {
      const list = add.closest("[data-list-input]");
      const row = list.querySelector("template").content.firstElementChild.cloneNode(true);
      list.querySelector(".list-items").appendChild(row);
      row.querySelector("input, textarea").focus();
      changed(list);
      return;
    }
    const remove = event.target.closest("[data-list-remove]");
    if (remove) {
      const list = remove.closest("[data-list-input]");
      remove.closest(".list-item").remove();
      changed(list);
    }
  });
  // Enter in a list item adds the next item instead of submitting the whole form.
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.target.tagName !== "INPUT") return;
    const list = event.target.closest("[data-list-input]");
    if (!list || event.target.list) return;
    event.preventDefault();
    list.querySelector("[data-list-add]").click();
  });
})();
