/* Rackpilot incidents: the incident page follows ws/incidents/<id>/ (apps/diagnosis/consumers.py). A frame says what
 * the runbook has just stored (evidence, a new ranking, the incident's or a fix's state); the page then fetches its
 * live part again, rendered by the server from the stored rows, so the timeline, the ranked causes, the suggestions
 * and the fix change in place and never differ from what a reload shows. Without a socket it polls that part every
 * 2 s while the runbook is active. The socket helpers (address, close codes) are jobs.js's. */
(function () {
  "use strict";
  var POLL_MS = 2000;
  var SETTLE_MS = 150;  // frames come in bursts (a shard's evidence, then its ranking): one fetch per burst

  function follow(opts) {
    var jobs = window.RackpilotJobs;
    var refused = Object.assign({}, jobs.refused, { 4404: "not live: no such incident" });
    var box = document.getElementById("incident-live");
    var connState = document.getElementById("conn-state");
    var state = { mode: "connecting", received: 0, pushed: [], refreshes: 0, polls: 0, failures: 0,
                  active: opts.active, ws: null, pollTimer: null, pending: null };
    var queue = Promise.resolve();

    function setMode(mode, text) { state.mode = mode; if (connState) { connState.textContent = text; } }

    function refresh() {
      return fetch(opts.liveUrl, { credentials: "same-origin", headers: { "HX-Request": "true" } })
        .then(function (r) {
          if (!r.ok) { throw new Error(opts.liveUrl + " answered " + r.status); }
          return r.text();
        })
        .then(function (html) {
          box.innerHTML = html;
          state.refreshes += 1;
          var section = document.getElementById("incident-state");
          state.active = !!section && section.dataset.active === "true";
          if (!state.active) { stopPolling(); }
        });
    }
    function refreshSoon() {
      if (state.pending) { return; }
      state.pending = setTimeout(function () {
        state.pending = null;
        queue = queue.then(refresh).catch(function (e) { console.warn(e); });
      }, SETTLE_MS);
    }

    function poll() {
      state.polls += 1;
      queue = queue.then(refresh).catch(function (e) { console.warn(e); });
    }
    function startPolling(text) {
      setMode("polling", text || "polling (live updates unavailable)");
      if (state.pollTimer || !state.active) { return; }
      state.pollTimer = setInterval(poll, POLL_MS);
    }
    function stopPolling() { if (state.pollTimer) { clearInterval(state.pollTimer); state.pollTimer = null; } }

    function connect() {
      if (!("WebSocket" in window)) { startPolling(); return; }
      var ws = new WebSocket(jobs.wsUrl("/ws/incidents/" + opts.id + "/"));
      state.ws = ws;
      var opened = false;
      // A refused socket is accepted, then closed with a code (docs/jobs.md): it is live once the first frame came.
      ws.onmessage = function (msg) {
        var frame = JSON.parse(msg.data);
        if (!opened) { opened = true; state.failures = 0; stopPolling(); setMode("live", "live"); }
        state.received += 1;
        if (frame.type !== "hello") { state.pushed.push(frame.type); }
        refreshSoon();  // the hello too: whatever was stored before the socket joined is caught up
      };
      ws.onclose = function (e) {
        if (state.ws !== ws) { return; }
        state.ws = null;
        if (!opened) { state.failures += 1; }
        if (refused[e.code]) { stopPolling(); setMode("denied", refused[e.code]); return; }
        if (e.code === jobs.closeUnavailable) {
          startPolling("live updates unavailable (the server lost its message broker); polling and retrying");
        } else if (state.failures >= 3) { startPolling(); }
        else { setMode("reconnecting", "reconnecting…"); }
        setTimeout(connect, opened ? 300 : Math.min(30000, 1000 * Math.pow(2, state.failures)));
      };
    }

    connect();
    window.rackpilotIncident = {
      state: state,
      dropSocket: function () { if (state.ws) { state.ws.close(); } },
    };
  }

  window.RackpilotIncidents = { follow: follow };
})();
