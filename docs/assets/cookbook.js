// The index's hardware filter (docs/index.md's select, shown only when this runs). Hand-written,
// not generated. Without it (or without scripts) every row shows. It hides the columns and rows
// of other hardware, and a family with none left; ?hw=ID preselects one (scripts/check-site).
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
      var wrap = table.closest(".md-typeset__scrollwrap") || table;
      wrap.style.display = shown ? "" : "none";
      var h = wrap.previousElementSibling;
      if (matrix && h && /^H2$/.test(h.tagName)) h.style.display = shown ? "" : "none";
    });
  }
  select.addEventListener("change", apply);
  var fromUrl = new URLSearchParams(location.search).get("hw");
  if (fromUrl) { select.value = fromUrl; }
  apply();
})();
