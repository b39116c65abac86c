/* sandbox-replay report: sorting, filtering, and the calls of each episode.
   Everything shown from the data is untrusted (traces, tasks, sandboxes): it is only ever set
   with textContent or as attribute values through setAttribute of fixed names, never as markup. */
(function () {
  "use strict";
  var dataNode = document.getElementById("report-data");
  var DATA = dataNode ? JSON.parse(dataNode.textContent) : {};

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  /* -- sorting ------------------------------------------------------------------------- */
  function cellValue(row, index, numeric) {
    var cell = row.children[index];
    if (!cell) { return numeric ? -Infinity : ""; }
    var raw = cell.hasAttribute("data-v") ? cell.getAttribute("data-v") : cell.textContent;
    if (numeric) {
      var num = parseFloat(raw);
      return isNaN(num) ? -Infinity : num;
    }
    return raw.trim().toLowerCase();
  }
  function sortBy(table, th) {
    var index = Array.prototype.indexOf.call(th.parentNode.children, th);
    var numeric = th.getAttribute("data-type") === "num";
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    var heads = th.parentNode.children;
    for (var i = 0; i < heads.length; i++) { heads[i].removeAttribute("aria-sort"); }
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
      var order = x < y ? -1 : x > y ? 1 : 0;
      return ascending ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].children, function (th) {
      var label = th.textContent;
      th.textContent = "";
      var button = el("button", "sort", label);
      button.type = "button";
      button.addEventListener("click", function () { sortBy(table, th); });
      th.appendChild(button);
    });
  });

  /* -- filtering ----------------------------------------------------------------------- */
  var filters = document.getElementById("filters");
  function applyFilters() {
    var variant = filters.querySelector("[name=variant]").value;
    var status = filters.querySelector("[name=status]").value;
    var task = filters.querySelector("[name=task]").value.trim().toLowerCase();
    var shown = 0, all = 0;
    Array.prototype.forEach.call(document.querySelectorAll("[data-filter] [data-task]"), function (node) {
      var ok = (!variant || node.getAttribute("data-variant") === variant) &&
        (!status || !node.hasAttribute("data-status") || node.getAttribute("data-status") === status) &&
        (!task || node.getAttribute("data-task").toLowerCase().indexOf(task) !== -1);
      node.hidden = !ok;
      if (node.tagName === "TR" && node.closest("#episodes-table")) { all++; if (ok) { shown++; } }
    });
    var count = document.getElementById("filter-count");
    if (count) { count.textContent = shown + " of " + all + " episodes shown"; }
  }
  if (filters) {
    filters.hidden = false;
    Array.prototype.forEach.call(filters.querySelectorAll("select, input"), function (input) {
      input.addEventListener("input", applyFilters);
      input.addEventListener("change", applyFilters);
    });
    applyFilters();
  }

  /* -- the calls of an episode --------------------------------------------------------- */
  function capped(parent, label, value) {
    if (!value) { return; }
    var wrap = el("div");
    wrap.appendChild(el("span", "muted", label));
    wrap.appendChild(el("pre", null, value.t));
    if (value.n !== undefined) {
      wrap.appendChild(el("div", "cut", "truncated: " + value.t.length + " of " + value.n +
        " characters shown (the whole text is in the trace)"));
    }
    parent.appendChild(wrap);
  }
  function fmt(value, digits) {
    return value === null || value === undefined ? "-" : Number(value).toFixed(digits);
  }
  function renderCall(call) {
    var box = el("div", "call");
    box.setAttribute("data-index", String(call.index));
    var head = el("div", "head", "#" + call.index + " " + call.tool);
    if (call.step) { head.appendChild(el("span", "tag", "step " + call.step)); }
    if (call.effect) { head.appendChild(el("span", "tag", call.effect)); }
    var source = (DATA.sources || {})[call.source] || call.source || "unknown";
    var served = source.indexOf("served") === 0;
    head.appendChild(el("span", "tag " + (served ? "served" : source === "executed" ? "executed" : ""), source));
    if (call.error) { head.appendChild(el("span", "tag error", "error " + call.error["class"])); }
    box.appendChild(head);
    if (call.kind === "turn") {
      box.appendChild(el("div", "muted", "model " + (call.model || "unknown") + " · tokens in " +
        fmt(call.tokens_in, 0) + ", out " + fmt(call.tokens_out, 0) + " · USD " + fmt(call.usd, 6)));
      capped(box, "request", call.request);
      capped(box, "response (raw body)", call.body);
    } else {
      capped(box, "arguments", call.args);
      capped(box, "result (raw body)", call.body);
    }
    if (call.body_truncated_at_record) {
      box.appendChild(el("div", "cut", "the recording itself kept a truncated body (" +
        call.body_truncated_at_record + " bytes originally)"));
    }
    if (call.error) { capped(box, "error message", call.error.message); }
    return box;
  }
  function renderEpisode(target) {
    var episode = (DATA.episodes || {})[target.getAttribute("data-episode")];
    target.textContent = "";
    if (!episode) { target.appendChild(el("p", "muted", "no trace")); return; }
    if (episode.error) { target.appendChild(el("p", "status-failed", "trace unreadable: " + episode.error)); return; }
    (episode.problems || []).forEach(function (p) { target.appendChild(el("p", "cut", p)); });
    episode.calls.forEach(function (call) { target.appendChild(renderCall(call)); });
    if (episode.calls_omitted > 0) {
      target.appendChild(el("p", "cut", episode.calls_omitted + " more calls not shown (" +
        episode.calls_total + " in the trace)"));
    }
    var end = episode.end;
    if (end) {
      capped(target, "output", end.output);
      capped(target, "reason", end.reason);
      capped(target, "stderr (last lines)", end.stderr_tail);
    }
  }
  Array.prototype.forEach.call(document.querySelectorAll("div.calls[data-episode]"), function (target) {
    var details = target.closest("details");
    if (!details) { renderEpisode(target); return; }
    details.addEventListener("toggle", function () {
      if (details.open && !target.hasAttribute("data-rendered")) {
        target.setAttribute("data-rendered", "1");
        renderEpisode(target);
      }
    });
  });
  document.documentElement.setAttribute("data-ready", "1");
})();
