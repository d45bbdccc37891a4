// Search (task id or category) and filter (change, category) the per-task table. Settings also come
// from the address, e.g. compare.html?change=newly%20failing&q=refund, so a link opens it filtered.
(function () {
  "use strict";
  var search = document.getElementById("search");
  var change = document.getElementById("change");
  var category = document.getElementById("category");
  var shown = document.getElementById("shown-count");
  var rows = Array.prototype.slice.call(document.querySelectorAll("#changes tr.task-change"));

  function apply() {
    var query = search.value.trim().toLowerCase();
    var visible = 0;
    rows.forEach(function (row) {
      var text = (row.getAttribute("data-task") + " " + row.getAttribute("data-category")).toLowerCase();
      var hide = (query !== "" && text.indexOf(query) < 0)
        || (change.value !== "" && row.getAttribute("data-change") !== change.value)
        || (category.value !== "" && row.getAttribute("data-category") !== category.value);
      row.classList.toggle("hidden", hide);
      if (!hide) { visible += 1; }
    });
    shown.textContent = visible + " of " + rows.length + " tasks shown";
  }

  function choose(select, value) {
    if (value !== null && Array.prototype.some.call(select.options, function (o) { return o.value === value; })) {
      select.value = value;
    }
  }

  var params = new URLSearchParams(window.location.search);
  search.value = params.get("q") || "";
  choose(change, params.get("change"));
  choose(category, params.get("category"));
  search.addEventListener("input", apply);
  change.addEventListener("change", apply);
  category.addEventListener("change", apply);
  apply();
}());
