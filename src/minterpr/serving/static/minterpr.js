/* minterpr search page: the few behaviours htmx does not give (no inline script: a CSP may forbid it).
   Everything works without it; it only adds conveniences. */
(function () {
  "use strict";

  // The export form downloads a zip, so the page itself does not change. Once the download has
  // been answered, fetch the workspace again so that its "Export made" notice appears.
  function refreshAfterExport(form) {
    var url = form.getAttribute("data-refresh");
    if (!url || !window.htmx) { return; }
    [1500, 4000].forEach(function (delay) {
      window.setTimeout(function () {
        window.htmx.ajax("GET", url + window.location.search, {target: "#workspace", select: "#workspace", swap: "outerHTML"});
      }, delay);
    });
  }

  // Enter in the description box searches, as in a one-line field; Shift+Enter starts a new line.
  document.addEventListener("keydown", function (event) {
    var box = event.target;
    if (event.key !== "Enter" || event.shiftKey || event.isComposing || !box.matches || !box.matches("textarea#description")) { return; }
    event.preventDefault();
    if (box.form && box.value.trim()) { box.form.requestSubmit(); }
  });

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.matches && form.matches("form.export")) { refreshAfterExport(form); }
  });
})();
