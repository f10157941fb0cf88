/* Rackpilot deployments: the running view follows the current run's job stream over jobs.js's one connection
 * (jobs.js draws that job's matrix and log) and adds what only a deployment has: each finished cell's outcome in the all-runs matrix and its suggestions,
 * appended live; when the run ends the server-rendered summary (state, phases, matrix, stored suggestions) is
 * fetched again. The review stage's "expand all" lives here too. */
(function () {
  "use strict";
  var TERMINAL = { succeeded: 1, failed: 1, canceled: 1, error: 1 };
  var COLOURS = { pass: "green", warn: "yellow", fail: "red", could_not_run: "grey" };

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = text; }
    return node;
  }

  var VERIFIED = { pass: 1, warn: 1 };

  // The server-rendered summary (state, phases, all-runs matrix, stored suggestions), fetched again and swapped in;
  // resolves once it is on the page. While it says "settling" (the run's job has ended, the deployment's state is not
  // written yet) or runs cluster acceptance, the summary polls itself (its hx-trigger) until the state is final.
  function refreshSummary() {
    var summary = document.getElementById("summary");
    if (!window.htmx || !summary) { location.reload(); return Promise.resolve(); }
    var swapped = window.htmx.ajax("GET", summary.getAttribute("hx-get"), { target: "#summary", swap: "outerHTML" });
    // Never hold the job's status back for long: a slow or failed fetch lets it paint after 5 s all the same.
    var limit = new Promise(function (resolve) { setTimeout(resolve, 5000); });
    return Promise.race([swapped, limit]);
  }

  // Each phase's "verified" count from the all-runs matrix as it stands, as the server counts it (pass or warn).
  function recountPhases() {
    Array.prototype.forEach.call(document.querySelectorAll("#phases .phase"), function (box) {
      var cells = document.querySelectorAll('#dmatrix td.dcell[data-phase="' + CSS.escape(box.dataset.phase) + '"]');
      var verified = Array.prototype.filter.call(cells, function (c) { return VERIFIED[c.dataset.outcome]; }).length;
      var count = box.querySelector(".verified");
      if (count) { count.textContent = String(verified); }
      var bar = box.querySelector(".bar");
      if (bar) { bar.style.width = (cells.length ? Math.round(100 * verified / cells.length) : 0) + "%"; }
    });
  }

  function markCell(hostname, step, outcome) {
    var cell = document.querySelector('td.dcell[data-host="' + CSS.escape(hostname) + '"][data-step="' + CSS.escape(step) + '"]');
    if (!cell || !outcome) { return; }
    cell.className = "dcell " + (COLOURS[outcome] || "grey");
    cell.dataset.outcome = outcome;
    cell.title = hostname + " " + step + ": " + outcome + " (this run)";
    recountPhases();
  }

  function appendSuggestion(s) {
    var box = document.getElementById("live-suggestions");
    if (!box) { return; }
    var seen = document.querySelector('.suggestion[data-state="open"][data-host="' + CSS.escape(s.hostname || "") +
                                      '"][data-problem="' + CSS.escape(s.problem || "") + '"]');
    if (seen) { return; }                                  // already listed (stored, or appended from a replay)
    var none = document.getElementById("no-suggestions");
    if (none) { none.hidden = true; }
    var open = document.getElementById("suggestion-open");
    if (open) { open.textContent = String(Number(open.textContent) + 1); }  // the stored panel recounts on refresh
    var card = el("div", "suggestion live");
    card.dataset.problem = s.problem || "";
    card.dataset.host = s.hostname || "";
    card.dataset.state = "open";
    var head = el("div", "suggestion-head");
    head.appendChild(el("b", "title", s.title));
    head.appendChild(document.createTextNode(" "));
    head.appendChild(el("span", "badge red", "new"));
    card.appendChild(head);
    card.appendChild(el("div", "muted where", (s.hostname || "") + " · " + (s.step || "") + (s.subject ? " · " + s.subject : "")));
    function para(label, text) {
      if (!text) { return; }
      var p = el("p");
      p.appendChild(el("b", null, label + " "));
      p.appendChild(document.createTextNode(text));
      card.appendChild(p);
    }
    para("Likely cause:", s.cause);
    para("Check next:", s.next_check);
    para("Fix:", s.fix);
    if (s.fix_commands && s.fix_commands.length) { card.appendChild(el("pre", "fix", s.fix_commands.join("\n"))); }
    card.appendChild(el("p", "muted", "Found just now."));
    box.appendChild(card);
  }

  // Suggestions are stored as their cell ends: fetch the stored panel (with its Approve fix / Dismiss buttons) once
  // a burst of them has arrived, instead of waiting for the run to end.
  var suggestionsTimer = null;
  function refreshSuggestionsSoon() {
    if (!window.htmx) { return; }
    clearTimeout(suggestionsTimer);
    suggestionsTimer = setTimeout(function () { window.htmx.trigger(document.body, "suggestions-refresh"); }, 1000);
  }

  // What the running view adds to the job page's stream: jobs.js owns the one websocket (with its replay, gap
  // refill and polling fallback) and hands every event and job status to these.
  function follow(opts) {
    var state = { lastSeq: 0, status: opts.status, done: TERMINAL[opts.status] === 1 };
    window.rackpilotDeployment = state;

    // The run has ended: the job's final status is painted only once the summary says how the deployment stands,
    // so the page never shows a finished run under a deployment still "Running".
    function finished() {
      if (state.done) { return null; }
      state.done = true;
      return refreshSummary();
    }
    return {
      onEvent: function (ev) {
        // A finished run's outcomes and suggestions are on the server-rendered page already.
        if (state.done || ev.seq <= state.lastSeq) { return; }
        state.lastSeq = ev.seq;
        var data = ev.data || {};
        if (ev.hostname && ev.step && data.outcome) { markCell(ev.hostname, ev.step, data.outcome); }
        (data.suggestions || []).forEach(appendSuggestion);
        if ((data.suggestions || []).some(function (s) { return s.id; })) { refreshSuggestionsSoon(); }
      },
      // May return a promise: jobs.js paints the job's status once it has settled.
      onJob: function (job) {
        if (!job || !job.status) { return null; }
        state.status = job.status;
        return TERMINAL[job.status] ? finished() : null;
      },
    };
  }

  document.addEventListener("click", function (e) {
    var toggle = e.target.closest("[data-toggle-details]");
    if (toggle) {
      var details = document.querySelectorAll(toggle.dataset.toggleDetails + " details");
      var open = !Array.prototype.every.call(details, function (d) { return d.open; });
      Array.prototype.forEach.call(details, function (d) { d.open = open; });
      return;
    }
    var cell = e.target.closest("td.dcell");
    if (cell) {
      Array.prototype.forEach.call(document.querySelectorAll("td.dcell.selected"), function (c) { c.classList.remove("selected"); });
      cell.classList.add("selected");
    }
  });

  window.RackpilotDeployments = { follow: follow };
})();
