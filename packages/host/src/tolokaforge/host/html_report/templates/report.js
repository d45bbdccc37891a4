// Filter (failed only) and sort (by score) the trial index. Settings also come from the address,
// e.g. report.html?failed=1&sort=score, so a link can open the report already filtered.
(function () {
  "use strict";
  var body = document.querySelector("#trials tbody");
  var failedOnly = document.getElementById("failed-only");
  var sortBy = document.getElementById("sort-by");
  var shown = document.getElementById("shown-count");
  var rows = Array.prototype.slice.call(body.querySelectorAll("tr.trial-row"));

  function score(row) {
    var value = row.getAttribute("data-score");
    return value === "" ? null : parseFloat(value);
  }

  function compare(mode) {
    return function (a, b) {
      var order = parseInt(a.getAttribute("data-order"), 10) - parseInt(b.getAttribute("data-order"), 10);
      if (mode === "task") { return order; }
      var x = score(a), y = score(b);
      // Trials without a score first: they are the ones to look at.
      if (x === null || y === null) { return (x === null ? -1 : 0) + (y === null ? 1 : 0) || order; }
      return (mode === "score" ? x - y : y - x) || order;
    };
  }

  function apply() {
    var visible = 0;
    rows.sort(compare(sortBy.value)).forEach(function (row) {
      var hide = failedOnly.checked && row.getAttribute("data-outcome") === "passed";
      row.classList.toggle("hidden", hide);
      if (!hide) { visible += 1; }
      body.appendChild(row);
    });
    document.querySelectorAll("section.trial").forEach(function (section) {
      section.classList.toggle("hidden", failedOnly.checked && section.getAttribute("data-outcome") === "passed");
    });
    shown.textContent = visible + " of " + rows.length + " trials shown";
  }

  var params = new URLSearchParams(window.location.search);
  failedOnly.checked = params.get("failed") === "1";
  if (["task", "score", "score-desc"].indexOf(params.get("sort")) >= 0) { sortBy.value = params.get("sort"); }
  failedOnly.addEventListener("change", apply);
  sortBy.addEventListener("change", apply);
  apply();
}());
