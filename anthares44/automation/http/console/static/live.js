// Live updates (the only script of the console; pages work without it): on a page with [data-live], listen to
// the server-sent events and, after each burst, re-read the page and bring the #live block up to date by swapping
// only the parts that changed. A form the operator is editing (focus inside it, or a field changed from what the
// page gave) is never replaced nor moved: its focus, caret and typed values stay; the parts around it are updated
// in place, matched by element id (else by tag and class). docs/console.md "Live updates".
(function () {
  "use strict";
  var box = document.querySelector("[data-live]");
  if (!box || !window.EventSource) { return; }
  var slice = Array.prototype.slice;

  function changed(field) {
    if (field.type === "hidden" || field.tagName === "BUTTON") { return false; }
    if (field.type === "checkbox" || field.type === "radio") { return field.checked !== field.defaultChecked; }
    if (field.tagName === "SELECT") {
      return slice.call(field.options).some(function (o) { return o.selected !== o.defaultSelected; });
    }
    return field.value !== field.defaultValue;
  }

  function editing(el) {
    if (el.nodeType !== 1) { return false; }
    var forms = el.tagName === "FORM" ? [el] : slice.call(el.querySelectorAll("form"));
    return forms.some(function (f) {
      return f.contains(document.activeElement) || slice.call(f.elements).some(changed);
    });
  }

  function same(a, b) {
    if (b.nodeType !== 1) { return false; }
    if (a.id || b.id) { return a.id === b.id; }
    return a.tagName === b.tagName && a.className === b.className;
  }

  function sameAttributes(a, b) {
    if (a.tagName !== b.tagName || a.attributes.length !== b.attributes.length) { return false; }
    return slice.call(a.attributes).every(function (x) { return b.getAttribute(x.name) === x.value; });
  }

  // Same shape: the same attributes and children of the same kinds in the same order (elements matched by id).
  function parallel(cur, fresh) {
    var a = cur.childNodes, b = fresh.childNodes;
    if (!sameAttributes(cur, fresh) || a.length !== b.length) { return false; }
    var elements = 0;
    for (var i = 0; i < a.length; i++) {
      if (a[i].nodeType !== b[i].nodeType || (a[i].nodeType === 1 && !same(a[i], b[i]))) { return false; }
      if (a[i].nodeType === 1) { elements++; }
    }
    return elements > 0;
  }

  // Bring `cur` to what `fresh` says, touching only what differs, and never a form being edited.
  function sync(cur, fresh) {
    if (cur.isEqualNode(fresh)) { return; }
    if (cur.tagName === "FORM" && editing(cur)) { return; }   // the form being edited: never touched
    if (parallel(cur, fresh)) {                               // descend: swap only the children that changed
      slice.call(cur.childNodes).forEach(function (n, i) {
        var f = fresh.childNodes[i];
        if (n.nodeType === 1) { sync(n, f); } else if (n.nodeValue !== f.nodeValue) { n.nodeValue = f.nodeValue; }
      });
      return;
    }
    if (!editing(cur)) { cur.replaceWith(document.importNode(fresh, true)); return; }
    // the shape changed around a form being edited: it stays where it is, the rest is rebuilt around it
    var kept = slice.call(cur.childNodes).filter(editing);
    slice.call(cur.childNodes).forEach(function (n) { if (kept.indexOf(n) < 0) { cur.removeChild(n); } });
    var next = 0;                                             // fresh nodes go before the next kept one
    slice.call(fresh.childNodes).forEach(function (n) {
      var match = kept.filter(function (k) { return same(k, n); })[0];
      if (match) { sync(match, n); next = kept.indexOf(match) + 1; return; }
      cur.insertBefore(document.importNode(n, true), kept[next] || null);
    });
  }

  var timer = null;
  function refresh() {
    timer = null;
    fetch(window.location.pathname + window.location.search, { credentials: "same-origin" })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("#live");
        var current = document.querySelector("#live");
        if (fresh && current && !current.querySelector("#replay-preview")) { sync(current, fresh); }
      });
  }
  function soon() { if (!timer) { timer = setTimeout(refresh, 150); } }
  var source = new EventSource(box.getAttribute("data-live"));
  source.addEventListener("change", soon);
  source.addEventListener("end", function () { source.close(); soon(); });
  source.onerror = function () { if (source.readyState === EventSource.CLOSED) { soon(); } };
})();
