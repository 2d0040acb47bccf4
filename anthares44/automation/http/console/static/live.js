// Live updates (the only script of the console; pages work without it): on a page with [data-live], listen to
// the run's server-sent events and, after each burst, re-read the page and swap in its #live block.
(function () {
  "use strict";
  var box = document.querySelector("[data-live]");
  if (!box || !window.EventSource) { return; }
  var timer = null;
  function refresh() {
    timer = null;
    fetch(window.location.pathname + window.location.search, { credentials: "same-origin" }).then(function (r) { return r.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("#live");
        var current = document.querySelector("#live");
        if (fresh && current && !current.querySelector("#replay-preview")) { current.replaceWith(fresh); }
      });
  }
  function soon() { if (!timer) { timer = setTimeout(refresh, 150); } }
  var source = new EventSource(box.getAttribute("data-live"));
  source.addEventListener("change", soon);
  source.addEventListener("end", function () { source.close(); soon(); });
  source.onerror = function () { if (source.readyState === EventSource.CLOSED) { soon(); } };
})();
