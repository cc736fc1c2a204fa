"""The style and script report.html carries inline (the page loads nothing from anywhere)."""

STYLE = """
:root { --ink: #1d2330; --muted: #5b6475; --line: #dde1e8; --band: #f6f7f9; --accent: #2458a6; --best: #e8f1ff; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff;
       font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1500px; margin: 0 auto; padding: 24px 32px 64px; }
h1 { font-size: 26px; margin: 0 0 12px; }
h2 { font-size: 20px; margin: 36px 0 8px; padding-top: 12px; border-top: 1px solid var(--line); }
h3 { font-size: 16px; margin: 24px 0 6px; }
p, li { max-width: 110ch; }
code { font: 0.9em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--band);
       padding: 0 3px; border-radius: 3px; }
h2:first-of-type { border-top: none; padding-top: 0; margin-top: 16px; }
ul.verdict { list-style: none; padding: 14px 18px; margin: 0 0 8px; background: #f3f7fd;
             border-left: 4px solid var(--accent); border-radius: 4px; }
ul.verdict li { margin: 6px 0; max-width: none; }
div.headline { font-size: 17px; line-height: 1.5; padding: 12px 18px; margin: 0 0 10px;
  border-left: 4px solid #2b6cb0; background: #f3f7fd; }
div.headline p { margin: 6px 0; max-width: none; }
p.verdict-note { color: var(--muted); font-size: 13px; margin: 4px 0; }
ul.bullets, ul.notes { color: var(--muted); font-size: 13px; padding-left: 18px; }
.controls { display: flex; gap: 12px; align-items: center; margin: 10px 0 6px; }
.filter { width: 320px; padding: 6px 10px; font: inherit; font-size: 14px; border: 1px solid #b9c0cc;
          border-radius: 4px; }
.count { color: var(--muted); font-size: 13px; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 10px; }
th, td { padding: 4px 7px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--band); position: sticky; top: 0; font-weight: 600; }
table.results td, table.data td { font-variant-numeric: tabular-nums; white-space: nowrap; }
table.results td.error { white-space: normal; min-width: 30ch; max-width: 48ch; }
td.num { text-align: right; }
table.results th button { all: unset; cursor: pointer; display: block; }
table.results th button::after { content: " ↕"; color: #aab1bd; font-size: 11px; }
table.results th[aria-sort="ascending"] button::after { content: " ▲"; color: var(--accent); }
table.results th[aria-sort="descending"] button::after { content: " ▼"; color: var(--accent); }
table.results tbody.group:nth-of-type(even) tr.main { background: #fbfbfc; }
table.results td[title] { cursor: help; text-decoration: underline dotted #b9c0cc; text-underline-offset: 3px; }
table.results td.best { background: var(--best); font-weight: 600; }
tr.twin { display: none; color: var(--muted); }
tr.twin td:first-child { padding-left: 26px; }
tbody.open tr.twin { display: table-row; }
tr.failed td { color: #a33; }
tr.skipped td { color: #9aa1ad; }
button.toggle { font: inherit; font-size: 11px; margin-left: 6px; padding: 0 6px; color: var(--accent);
                background: #fff; border: 1px solid #c9d6ea; border-radius: 10px; cursor: pointer; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 16px; margin: 16px 0; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 4px; padding: 8px; background: #fff; }
figure img { width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 12px; margin-top: 4px; }
"""

SCRIPT = """
(function () {
  function value(row, column) {
    var v = row.cells[column].dataset.v, n = Number(v);
    return v === "" ? null : isNaN(n) ? v.toLowerCase() : n;
  }
  document.querySelectorAll("table.results").forEach(function (table) {
    var headers = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(headers, function (th, column) {
      th.querySelector("button").addEventListener("click", function () {
        var descending = th.getAttribute("aria-sort") === "ascending";
        Array.prototype.forEach.call(headers, function (h) { h.setAttribute("aria-sort", "none"); });
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        var groups = Array.prototype.slice.call(table.tBodies);
        groups.sort(function (a, b) {
          var x = value(a.rows[0], column), y = value(b.rows[0], column);
          if (x === null || y === null) { return x === y ? 0 : x === null ? 1 : -1; }  // unmeasured last
          var order = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : (typeof x === "number" ? -1 : 1);
          return descending ? -order : order;
        });
        groups.forEach(function (group) { table.appendChild(group); });
      });
    });
    table.querySelectorAll("button.toggle").forEach(function (button) {
      button.addEventListener("click", function () {
        var group = button.closest("tbody");
        group.classList.toggle("open");
        button.setAttribute("aria-expanded", group.classList.contains("open"));
        button.textContent = button.textContent.replace(/^[▸▾]/, group.classList.contains("open") ? "▾" : "▸");
      });
    });
    var controls = table.closest(".scroll").previousElementSibling;
    var filter = controls.querySelector(".filter"), count = controls.querySelector(".count");
    filter.addEventListener("input", function () {
      var words = filter.value.toLowerCase().split(/\\s+/).filter(Boolean), shown = 0;
      Array.prototype.forEach.call(table.tBodies, function (group) {
        var text = group.textContent.toLowerCase();
        var match = words.every(function (w) { return text.indexOf(w) >= 0; });
        group.hidden = !match;
        shown += match ? 1 : 0;
      });
      count.textContent = words.length ? shown + " of " + count.dataset.total + " configurations" : count.dataset.total + " configurations";
    });
  });
})();
"""
