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

  // Look closely: zoom (whole scales 1x..4x, drawn pixel for pixel) and pan (drag, or the arrow keys on the
  // focused image). Sizes are set through the CSSOM, which the page's content-security policy allows.
  var MAX_ZOOM = 4;

  function zoomTo(view, scale) {
    var img = view.querySelector("img");
    if (!img || !img.naturalWidth) { return; }
    view.setAttribute("data-scale", String(scale));
    img.classList.toggle("pixel", scale > 0);
    img.style.width = scale > 0 ? (img.naturalWidth * scale) + "px" : "";
    img.style.maxWidth = scale > 0 ? "none" : "";
    img.style.maxHeight = scale > 0 ? "none" : "";
    var controls = view.previousElementSibling;
    if (controls && controls.classList.contains("zoom-controls")) {
      controls.querySelector(".zoom-level").textContent = scale > 0 ? scale + "\u00d7" : "fit";
      controls.querySelector("[data-zoom-step='-1']").disabled = scale === 0;
      controls.querySelector("[data-zoom-step='1']").disabled = scale >= MAX_ZOOM;
    }
  }

  function firstZoom(view) {
    var img = view.querySelector("img");
    if (view.getAttribute("data-zoom") !== "crop") { return zoomTo(view, 0); }
    var room = Math.max(window.innerHeight * 0.7, 1);  // the crop's box is at most 70 % of the window high
    var wide = Math.max(view.parentElement.clientWidth, 1);
    var fits = Math.floor(Math.min(room / img.naturalHeight, wide / img.naturalWidth));
    zoomTo(view, Math.max(1, Math.min(MAX_ZOOM, fits)));
  }

  function setUpZoom(view) {
    var img = view.querySelector("img");
    if (!img) { return; }
    if (img.complete && img.naturalWidth) { firstZoom(view); } else { img.addEventListener("load", function () { firstZoom(view); }); }
    var drag = null;
    view.addEventListener("pointerdown", function (event) {
      drag = {x: event.clientX, y: event.clientY, left: view.scrollLeft, top: view.scrollTop, moved: false};
    });
    view.addEventListener("pointermove", function (event) {
      if (!drag || !(event.buttons & 1)) { return; }
      var dx = event.clientX - drag.x, dy = event.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; }
      view.scrollLeft = drag.left - dx;
      view.scrollTop = drag.top - dy;
    });
    view.addEventListener("click", function (event) {  // a drag pans; only a plain click opens the image
      if (drag && drag.moved) { event.preventDefault(); }
      drag = null;
    });
    view.addEventListener("dragstart", function (event) { event.preventDefault(); });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("[data-zoom-step]") : null;
    if (!button) { return; }
    var view = button.parentElement.nextElementSibling;
    if (!view || !view.classList.contains("zoom-view")) { return; }
    var scale = parseInt(view.getAttribute("data-scale") || "0", 10) + parseInt(button.getAttribute("data-zoom-step"), 10);
    zoomTo(view, Math.max(0, Math.min(MAX_ZOOM, scale)));
  });

  function ready() { Array.prototype.forEach.call(document.querySelectorAll(".zoom-view"), setUpZoom); }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", ready); } else { ready(); }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.matches && form.matches("form.export")) { refreshAfterExport(form); }
  });
})();
