// The index's hardware filter (docs/index.md's select, shown only when this runs). Hand-written,
// not generated. Without it (or without scripts) every row shows. It hides the columns and rows
// of other hardware, and a section with none left (its heading and the text before its table, so
// no heading stands alone); it shows the selected kind's notes (.cb-note[data-hw-note]: the nearest
// recipes, the families that fit no single GPU of it), and .cb-empty ones only when no recipe of
// that kind is left on the page. ?hw=ID preselects one (scripts/check-site).
(function () {
  var box = document.getElementById("cb-filter");
  var select = document.getElementById("cb-hw");
  if (!box || !select) return;
  box.hidden = false;
  function apply() {
    var hw = select.value;
    document.querySelectorAll(".md-typeset table").forEach(function (table) {
      var heads = Array.prototype.slice.call(table.querySelectorAll("thead th"));
      var cols = heads.map(function (th) { var s = th.querySelector("[data-hw]"); return s && s.dataset.hw; });
      var matrix = cols.some(Boolean);
      var shown = 0;
      table.querySelectorAll("tbody tr").forEach(function (tr) {
        var cells = Array.prototype.slice.call(tr.children);
        var keep = !hw;
        if (matrix) {
          cells.forEach(function (td, i) {
            if (!cols[i]) return;
            td.style.display = hw && cols[i] !== hw ? "none" : "";
            if (cols[i] === hw && td.textContent.trim()) keep = true;
          });
        } else {
          var mark = tr.querySelector("[data-hw]");
          keep = keep || !mark || mark.dataset.hw === hw;
        }
        tr.style.display = keep ? "" : "none";
        if (keep) shown += 1;
      });
      heads.forEach(function (th, i) { th.style.display = matrix && hw && cols[i] && cols[i] !== hw ? "none" : ""; });
      // The theme wraps each table in a scroll box after this first runs (hence apply again on
      // load): the box, not the table, is what takes the space, so the box is what hides.
      var wrap = table.closest(".md-typeset__scrollwrap") || table;
      if (wrap !== table) table.style.display = "";
      wrap.style.display = shown ? "" : "none";
      // the section's heading and what stands between it and the table go with the table
      for (var el = wrap.previousElementSibling; el; el = el.previousElementSibling) {
        if (el.matches(".cb-note, .cb-filter") || el.tagName === "H1") break;
        el.style.display = shown ? "" : "none";
        if (el.tagName === "H2") break;
      }
    });
    var left = Array.prototype.filter.call(document.querySelectorAll(".md-typeset table a[href^='recipes/']"), function (a) {
      return a.offsetParent !== null;
    }).length;
    document.querySelectorAll(".cb-note").forEach(function (p) {
      var mine = hw && p.dataset.hwNote === hw;
      p.style.display = mine && (!p.classList.contains("cb-empty") || !left) ? "block" : "none";
    });
  }
  select.addEventListener("change", apply);
  var fromUrl = new URLSearchParams(location.search).get("hw");
  if (fromUrl) { select.value = fromUrl; }
  apply();
  window.addEventListener("load", apply);
  if (window.document$ && window.document$.subscribe) window.document$.subscribe(apply);
})();
