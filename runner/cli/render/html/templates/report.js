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

  /* -- filtering: every table and list follows the three filters ----------------------
     Each row or item a filter may hide carries data-task and data-variant / data-status (one
     value) or data-variants / data-statuses (a JSON list): it is shown when every active
     filter matches one of its values; an item without a value for a filter never matches it.
     Each [data-filter="label"] block is counted in the count line; a [data-group] (a list
     item, a paragraph) is hidden when none of its items is shown and its [data-count] says
     how many are. */
  var filters = document.getElementById("filters");
  function values(node, one, many) {
    if (node.hasAttribute(many)) {
      try { return JSON.parse(node.getAttribute(many)); } catch (e) { return []; }
    }
    return node.hasAttribute(one) ? [node.getAttribute(one)] : [];
  }
  function applyFilters() {
    var variant = filters.querySelector("[name=variant]").value;
    var status = filters.querySelector("[name=status]").value;
    var task = filters.querySelector("[name=task]").value.trim().toLowerCase();
    var counts = {}, order = [];
    Array.prototype.forEach.call(document.querySelectorAll("[data-filter]"), function (block) {
      var label = block.getAttribute("data-filter");
      if (label && !counts[label]) { counts[label] = [0, 0]; order.push(label); }
      Array.prototype.forEach.call(block.querySelectorAll("[data-task]"), function (node) {
        var ok = (!variant || values(node, "data-variant", "data-variants").indexOf(variant) !== -1) &&
          (!status || values(node, "data-status", "data-statuses").indexOf(status) !== -1) &&
          (!task || node.getAttribute("data-task").toLowerCase().indexOf(task) !== -1);
        node.hidden = !ok;
        if (label) { counts[label][1]++; if (ok) { counts[label][0]++; } }
      });
    });
    Array.prototype.forEach.call(document.querySelectorAll("[data-group]"), function (group) {
      var shown = group.querySelectorAll("[data-task]:not([hidden])").length;
      var count = group.querySelector("[data-count]");
      if (count) { count.textContent = String(shown); }
      group.hidden = shown === 0;
    });
    var parts = [];
    var episodes = counts.episodes || [0, 0];
    order.forEach(function (label) {
      if (label !== "episodes" && counts[label][1] > 0) {
        parts.push(label + " " + counts[label][0] + " of " + counts[label][1]);
      }
    });
    var line = episodes[0] + " of " + episodes[1] + " episodes shown";
    document.getElementById("filter-count").textContent =
      parts.length ? line + "; " + parts.join("; ") : line;
    document.getElementById("filter-note").hidden = !(variant || status || task);
  }
  if (filters) {
    filters.hidden = false;
    Array.prototype.forEach.call(filters.querySelectorAll("select, input"), function (input) {
      input.addEventListener("input", applyFilters);
      input.addEventListener("change", applyFilters);
    });
    applyFilters();
  }

  /* -- an episode as a conversation -----------------------------------------------------
     In call order: each model (or simulated user) turn's new messages and its reply, each
     tool call with its arguments, result, error or refusal, every call with its duration;
     a long value collapsed to its first line, the whole one click away; each call's raw
     JSON in a details element. */
  var LONG_CHARS = 400, LONG_LINES = 8, INLINE_CHARS = 160;
  function compact(text) {  /* indented JSON that fits on one line, on one line */
    if (text.length > 4 * INLINE_CHARS || "{[".indexOf(text.charAt(0)) === -1) { return text; }
    try {
      var one = JSON.stringify(JSON.parse(text));
      return one.length <= INLINE_CHARS ? one : text;
    } catch (e) { return text; }
  }
  function capped(parent, label, value, cls, ours) {
    /* ours: a value the report wrote as indented JSON (a tool's arguments), shown on one line
       when it fits; every other value (a raw body, a model's arguments) exactly as recorded */
    if (!value) { return; }
    var text = ours && value.n === undefined ? compact(value.t) : value.t;
    var lines = text.split("\n").length;
    var wrap;
    if (lines === 1 && text.length <= INLINE_CHARS && value.n === undefined && text) {
      wrap = el("div", "inline" + (cls ? " " + cls : ""));
      if (label) { wrap.appendChild(el("span", "muted", label + " ")); }
      wrap.appendChild(el("code", null, text));
      parent.appendChild(wrap);
      return;
    }
    if (text.length > LONG_CHARS || lines > LONG_LINES) {
      wrap = el("details", "long" + (cls ? " " + cls : ""));
      var first = text.replace(/\s+/g, " ").trim().slice(0, 120);
      var summary = el("summary");
      if (label) { summary.appendChild(el("span", "muted", label + " ")); }
      summary.appendChild(el("span", "preview", first + "…"));
      summary.appendChild(el("span", "muted", " (" + (value.n || text.length) + " characters, " +
        lines + (lines === 1 ? " line)" : " lines)")));
      wrap.appendChild(summary);
    } else {
      wrap = el("div", cls || null);
      if (label) { wrap.appendChild(el("span", "muted", label)); }
    }
    wrap.appendChild(el("pre", null, text));
    if (value.n !== undefined) {
      wrap.appendChild(el("div", "cut", "truncated: " + text.length + " of " + value.n +
        " characters shown (the whole text is in the trace)"));
    }
    parent.appendChild(wrap);
  }
  function fmt(value, digits) {
    return value === null || value === undefined ? "-" : Number(value).toFixed(digits);
  }
  function seconds(value) {
    if (value === null || value === undefined) { return "duration not recorded"; }
    if (value < 0.001) { return (value * 1e6).toFixed(0) + " µs"; }
    if (value < 1) { return (value * 1000).toFixed(value < 0.01 ? 2 : 1) + " ms"; }
    return value.toFixed(2) + " s";
  }
  var ROLE_WORDS = { system: "system", user: "user", assistant: "assistant", tool: "tool result",
    developer: "developer" };
  function message(parent, msg, extra) {
    var box = el("div", "msg role-" + String(msg.role).replace(/[^a-z_-]/gi, ""));
    var who = el("div", "who", (ROLE_WORDS[msg.role] || msg.role) + (extra || ""));
    if (msg.ref) { who.appendChild(el("span", "ref", " for " + msg.ref)); }
    box.appendChild(who);
    if (msg.text && msg.text.t) { capped(box, null, msg.text); }
    (msg.tool_calls || []).forEach(function (tc) {
      var ask = el("div", "ask");
      ask.appendChild(el("span", "muted", "calls tool "));
      ask.appendChild(el("code", null, tc.name));
      box.appendChild(ask);
      capped(box, "arguments", tc.arguments);
    });
    if (!(msg.text && msg.text.t) && !(msg.tool_calls || []).length) {
      box.appendChild(el("div", "muted", "(empty)"));
    }
    parent.appendChild(box);
  }
  function rawJson(box, call) {
    var raw = el("details", "raw");
    raw.appendChild(el("summary", "muted", "raw JSON"));
    var pre = el("pre");
    raw.appendChild(pre);
    raw.addEventListener("toggle", function () {
      if (raw.open && !pre.textContent) {
        var shown = {};
        Object.keys(call).forEach(function (k) { if (k !== "conversation") { shown[k] = call[k]; } });
        pre.textContent = JSON.stringify(shown, null, 1);
      }
    });
    box.appendChild(raw);
  }
  function renderCall(call) {
    var turn = call.kind === "turn";
    var box = el("div", "call " + (turn ? "turn" : "tool"));
    box.setAttribute("data-index", String(call.index));
    var head = el("div", "head");
    head.appendChild(el("span", null, "#" + call.index + " " + (turn ? call.tool + " turn" : call.tool)));
    if (call.step) { head.appendChild(el("span", "tag", "step " + call.step)); }
    if (call.effect) { head.appendChild(el("span", "tag", call.effect)); }
    var source = (DATA.sources || {})[call.source] || call.source || "unknown";
    var served = source.indexOf("served") === 0;
    if (!call.denied) {
      head.appendChild(el("span", "tag " + (served ? "served" : source === "executed" ? "executed" : ""), source));
    }
    if (call.denied) { head.appendChild(el("span", "tag denied", "denied by policy")); }
    else if (call.error) { head.appendChild(el("span", "tag error", "error " + call.error["class"])); }
    var time = el("span", "timing", seconds(call.duration_s));
    if (call.at_s !== undefined) {
      time.setAttribute("title", "run clock +" + call.at_s + " s at the call");
    }
    head.appendChild(time);
    box.appendChild(head);
    if (turn) {
      box.appendChild(el("div", "muted", "model " + (call.model || "unknown") + " · tokens in " +
        fmt(call.tokens_in, 0) + ", out " + fmt(call.tokens_out, 0) + " · USD " + fmt(call.usd, 6)));
      var conv = call.conversation;
      if (conv && conv.note) { box.appendChild(el("div", "cut", conv.note)); }
      if (conv && call.tool === "user" && conv.messages.length) {
        /* a simulated user is sent the agent's words as "user" and its own as "assistant":
           the agent's turns above already show them, so they wait behind a click */
        var sent = el("details", "sent");
        sent.appendChild(el("summary", "muted", "what the simulated user was sent (" +
          conv.messages.length + " message" + (conv.messages.length === 1 ? "" : "s") +
          ", from its side: the agent is \"user\")"));
        conv.messages.forEach(function (m) { message(sent, m); });
        box.appendChild(sent);
      } else if (conv) { conv.messages.forEach(function (m) { message(box, m); }); }
      if (conv && conv.reply) {
        message(box, conv.reply, call.tool === "user" ? " (simulated)" : "");
      } else {
        capped(box, "request", conv ? null : call.request);
        capped(box, "response (raw body; not read as a reply)", call.body);
      }
    } else {
      capped(box, "arguments", call.args, null, true);
      if (call.denied) {
        var why = el("div", "denied");
        why.appendChild(el("b", null, "denied by policy"));
        why.appendChild(el("span", null, (call.denied.rule ? " (rule " + call.denied.rule + ")" : "") +
          ": " + call.denied.reason + "; nothing executed"));
        box.appendChild(why);
      }
      capped(box, "result (raw body)", call.body);
    }
    if (call.body_truncated_at_record) {
      box.appendChild(el("div", "cut", "the recording itself kept a truncated body (" +
        call.body_truncated_at_record + " bytes originally)"));
    }
    if (call.error && !call.denied) { capped(box, "error " + call.error["class"], call.error.message, "error"); }
    rawJson(box, call);
    return box;
  }
  function renderEpisode(target) {
    var episode = (DATA.episodes || {})[target.getAttribute("data-episode")];
    target.textContent = "";
    if (!episode) { target.appendChild(el("p", "muted", "no trace")); return; }
    if (episode.error) { target.appendChild(el("p", "status-failed", "trace unreadable: " + episode.error)); return; }
    (episode.problems || []).forEach(function (p) { target.appendChild(el("p", "cut", p)); });
    var next = 0;
    episode.calls.forEach(function (call) {
      if (call.index > next) {  // a gap in the indexes: calls the trace does not hold
        target.appendChild(el("p", "cut", (call.index - next === 1 ? "call #" + next :
          "calls #" + next + "–#" + (call.index - 1)) + " not in the trace"));
      }
      next = call.index + 1;
      target.appendChild(renderCall(call));
    });
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
