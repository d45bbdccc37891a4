// Search, filter and sort the trial index; the trials' sections follow their rows. Search matches a
// trial's task id, category, reason and everything its section shows (the conversation included).
// Settings also come from the address, e.g. report.html?outcome=not-passed&sort=score&q=refund
// (failed=1 is short for outcome=not-passed), so a link can open the report already filtered.
(function () {
  "use strict";
  var body = document.querySelector("#trials tbody");
  var search = document.getElementById("search");
  var outcome = document.getElementById("outcome");
  var category = document.getElementById("category");
  var sortBy = document.getElementById("sort-by");
  var shown = document.getElementById("shown-count");
  var rows = Array.prototype.slice.call(body.querySelectorAll("tr.trial-row"));
  var texts = new Map();
  rows.forEach(function (row) {
    var section = document.getElementById(row.getAttribute("data-trial"));
    texts.set(row, (row.textContent + " " + row.getAttribute("data-category") + " "
      + (section ? section.textContent : "")).toLowerCase());
  });

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

  function hidden(row, query) {
    var kind = row.getAttribute("data-outcome");
    if (outcome.value === "not-passed" ? kind === "passed" : outcome.value !== "" && kind !== outcome.value) {
      return true;
    }
    if (category && category.value !== "" && row.getAttribute("data-category") !== category.value) { return true; }
    return query !== "" && texts.get(row).indexOf(query) < 0;
  }

  function apply() {
    var query = search.value.trim().toLowerCase();
    var visible = 0;
    rows.sort(compare(sortBy.value)).forEach(function (row) {
      var hide = hidden(row, query);
      row.classList.toggle("hidden", hide);
      var section = document.getElementById(row.getAttribute("data-trial"));
      if (section) { section.classList.toggle("hidden", hide); }
      if (!hide) { visible += 1; }
      body.appendChild(row);
    });
    shown.textContent = visible + " of " + rows.length + " trials shown";
  }

  function choose(select, value) {
    if (select && value !== null && Array.prototype.some.call(select.options, function (o) { return o.value === value; })) {
      select.value = value;
    }
  }

  var params = new URLSearchParams(window.location.search);
  search.value = params.get("q") || "";
  choose(outcome, params.get("failed") === "1" ? "not-passed" : params.get("outcome"));
  choose(category, params.get("category"));
  choose(sortBy, params.get("sort"));
  search.addEventListener("input", apply);
  [outcome, category, sortBy].forEach(function (select) {
    if (select) { select.addEventListener("change", apply); }
  });
  apply();
}());
