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
