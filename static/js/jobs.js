/* Rackpilot jobs: live job list and job page. The database is the truth; the websocket is a fast copy of it.
 * Events carry gapless seq numbers: duplicates are dropped, a gap is refilled over REST, and when websockets are
 * unavailable the page polls the same REST endpoints. */
(function () {
  "use strict";
  var TERMINAL = { succeeded: 1, failed: 1, canceled: 1, error: 1 };
  var FAILED = { failed: 1, error: 1 };  // the cells the matrix's failures-only view shows
  var MAX_LOG_ROWS = 20000;
  // The websocket close codes of docs/jobs.md, in words: the page says why it is not live.
  var REFUSED = {
    4400: "not live: this page's address (scheme, host and port) is not an allowed origin of the portal",
    4401: "not live: you are signed out; reload the page to sign in again",
    4403: "not live: your role may not watch jobs",
    4404: "not live: no such job, or it is not visible to you"
  };
  var CLOSE_UNAVAILABLE = 4503;  // the server's channel layer (Redis) is down: poll, and retry later

  function label(status) { return status ? status.charAt(0).toUpperCase() + status.slice(1) : ""; }
  function wsUrl(path) { return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path; }
  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } }).then(function (r) {
      if (!r.ok) { throw new Error(url + " answered " + r.status); }
      return r.json();
    });
  }
  // An ISO time from the API as the page's server renders it ("Y-m-d H:i:s"); the element keeps "—" until known.
  function setTime(elementId, iso) {
    var el = document.getElementById(elementId);
    if (el && iso) { el.textContent = iso.replace("T", " ").slice(0, 19); }
  }
  function setBadge(el, status, colour) {
    if (!el) { return; }
    el.className = "badge " + (colour || "grey");
    el.textContent = label(status);
  }

  // `listener` (optional): { onEvent(ev), onJob(job) } for a page that shows more than the job (a deployment's
  // running view). It sees every event once, in seq order, and every job status, over this page's one connection.
  function detail(initial, listener) {
    var id = initial.id;
    listener = listener || {};
    var state = { lastSeq: 0, status: initial.status, ws: null, mode: "connecting", failures: 0, received: 0,
                  seqs: [], pollTimer: null, closedByPage: false };
    var log = document.getElementById("log");
    var nodeFilter = document.getElementById("log-node");
    var follow = document.getElementById("log-follow");
    var connState = document.getElementById("conn-state");
    var matrix = document.getElementById("matrix");
    var more = document.getElementById("matrix-more");
    var queue = Promise.resolve();

    function setMode(mode, text) { state.mode = mode; if (connState) { connState.textContent = text; } }

    function addEvent(ev) {
      if (ev.seq <= state.lastSeq) { return; }            // a duplicate (replay overlapping live): drop it
      state.lastSeq = ev.seq;
      state.seqs.push(ev.seq);
      var row = document.createElement("div");
      row.className = "ev level-" + ev.level;
      row.dataset.seq = ev.seq;
      row.dataset.host = ev.hostname || "";
      var when = ev.t ? ev.t.slice(11, 19) : "";
      row.textContent = when + " " + (ev.hostname ? ev.hostname + " " : "") + (ev.step ? "[" + ev.step + "] " : "") + ev.message;
      if (nodeFilter.value && ev.hostname && ev.hostname !== nodeFilter.value) { row.hidden = true; }
      log.appendChild(row);
      while (log.childElementCount > MAX_LOG_ROWS) { log.removeChild(log.firstElementChild); }
      if (ev.data && ev.data.progress) { showProgress(ev.data.progress); }  // a job without a matrix (an import)
      if (listener.onEvent) { listener.onEvent(ev); }
    }

    function showProgress(progress) {
      if (progress.counts) { showCounts(progress.counts); }
      var failedNodes = document.getElementById("matrix-failed-nodes");
      if (failedNodes && progress.failed_nodes !== undefined) {
        var noun = failedNodes.dataset.noun || "node";
        failedNodes.textContent = progress.failed_nodes + " " + noun + (progress.failed_nodes === 1 ? "" : "s") + " with a failure";
      }
      document.getElementById("progress-bar").style.width = progress.percent + "%";
      document.getElementById("progress-percent").textContent = progress.percent + "%";
      document.getElementById("progress-count").textContent = progress.done + " of " + progress.total;
    }

    // Cells per status for the whole job (every page of the matrix), in the statuses' order.
    function showCounts(counts) {
      var el = document.getElementById("step-counts");
      if (!el) { return; }
      var chips = Object.keys(initial.step_labels || {}).filter(function (status) { return counts[status]; });
      el.replaceChildren.apply(el, chips.map(function (status) {
        var chip = document.createElement("span");
        var key = document.createElement("span");
        chip.className = "count-chip";
        key.className = "cell-key " + ((initial.step_colours || {})[status] || "grey");
        chip.append(key, " " + counts[status] + " " + initial.step_labels[status].toLowerCase());
        return chip;
      }));
    }

    function fetchMissing() {
      // Everything after lastSeq from the database, page by page.
      return getJSON("/api/jobs/" + id + "/events/?after=" + state.lastSeq).then(function (page) {
        page.events.forEach(addEvent);
        if (page.more) { return fetchMissing(); }
        return page;
      });
    }

    function addEvents(events) {
      var pending = events.filter(function (ev) { return ev.seq > state.lastSeq; });
      if (!pending.length) { return Promise.resolve(); }
      if (pending[0].seq > state.lastSeq + 1) {             // a gap: refill it over REST, then go on
        return fetchMissing().then(function () { pending.forEach(addEvent); scroll(); });
      }
      pending.forEach(addEvent);
      scroll();
      return Promise.resolve();
    }

    function scroll() {
      document.getElementById("log-count").textContent = state.lastSeq + " events";
      if (follow.checked) { log.scrollTop = log.scrollHeight; }
    }

    function applySteps(steps) {
      (steps || []).forEach(function (s) {
        var cell = document.querySelector('td.cell[data-host="' + CSS.escape(s.hostname) + '"][data-step="' + CSS.escape(s.step) + '"]');
        // The matrix shows one page of nodes: cells of other pages are not here (their counts above still move).
        // In the failures-only view a new failure is announced rather than drawn, so the rows do not jump.
        if (!cell) {
          if (FAILED[s.status] && matrix && matrix.dataset.failuresOnly && more) { more.hidden = false; }
          return;
        }
        cell.className = "cell " + s.colour;
        cell.dataset.status = s.status;
        cell.title = s.hostname + " " + s.step + ": " + s.status + (s.summary ? " — " + s.summary : "");
        cell.firstElementChild && (cell.firstElementChild.textContent = s.status);
      });
    }

    // The listener's onJob may return a promise (a deployment refetching its summary when the run ends): the
    // status is painted once it resolves, so the two parts of the page change together.
    function applyJob(job) {
      if (!job) { return Promise.resolve(); }
      state.status = job.status;
      var ready = listener.onJob ? listener.onJob(job) : null;
      return Promise.resolve(ready).catch(function (e) { console.warn(e); }).then(function () { paintJob(job); });
    }

    function paintJob(job) {
      setBadge(document.getElementById("job-status"), job.status, job.colour);
      document.getElementById("progress-bar").className = "bar " + (job.colour || "");
      document.getElementById("job-status-text").textContent = label(job.status);
      if (job.progress && job.progress.total) { showProgress(job.progress); }
      document.getElementById("job-summary").textContent = job.summary || "";
      setTime("job-started", job.started);
      setTime("job-finished", job.finished);
      var form = document.getElementById("cancel-form");
      if (form && TERMINAL[job.status]) { form.remove(); }  // nothing left to cancel
      else if (form && job.cancel_requested) {
        var button = document.getElementById("cancel-button");
        button.disabled = true;
        button.textContent = "Canceling…";
      }
    }

    function handle(frame) {
      state.received += 1;
      if (frame.type === "state") { applySteps(frame.steps); return applyJob(frame.job); }
      if (frame.type === "batch") {
        return addEvents(frame.events || []).then(function () { applySteps(frame.steps); return applyJob(frame.job); });
      }
      return Promise.resolve();
    }

    function connect() {
      if (!("WebSocket" in window)) { startPolling(); return; }
      var ws = new WebSocket(wsUrl("/ws/jobs/" + id + "/?after=" + state.lastSeq));
      state.ws = ws;
      var opened = false;
      // A refused socket is accepted, then closed with a code (docs/jobs.md): it is live once the first frame came.
      ws.onmessage = function (msg) {
        if (!opened) { opened = true; state.failures = 0; stopPolling(); setMode("live", "live"); }
        var frame = JSON.parse(msg.data);
        queue = queue.then(function () { return handle(frame); }).catch(function (e) { console.warn(e); });
      };
      ws.onclose = function (e) {
        if (state.ws !== ws) { return; }
        state.ws = null;
        if (!opened) { state.failures += 1; }
        if (REFUSED[e.code]) { stopPolling(); setMode("denied", REFUSED[e.code]); return; }
        if (TERMINAL[state.status] && opened) {
          // Finished: catch up once over REST in case the last push was lost, then rest.
          queue = queue.then(fetchMissing).catch(function () {});
          setMode("done", "finished");
          return;
        }
        if (e.code === CLOSE_UNAVAILABLE) { startPolling(); setMode("polling", "live updates unavailable (the server lost its message broker); polling and retrying"); }
        else if (state.failures >= 3) { startPolling(); }
        else { setMode("reconnecting", "reconnecting…"); }
        var delay = Math.min(30000, 1000 * Math.pow(2, state.failures));
        setTimeout(function () { queue = queue.then(fetchMissing).catch(function () {}).then(connect); }, opened ? 300 : delay);
      };
    }

    function poll() {
      queue = queue.then(function () {
        return Promise.all([fetchMissing(), getJSON("/api/jobs/" + id + "/"),
                            getJSON("/api/jobs/" + id + "/steps/?limit=100000")]).then(function (r) {
          applySteps(r[2].results);
          var counts = {}, failedHosts = {};
          r[2].results.forEach(function (step) {
            counts[step.status] = (counts[step.status] || 0) + 1;
            if (FAILED[step.status]) { failedHosts[step.hostname] = 1; }
          });
          scroll();
          if (TERMINAL[r[1].status]) { stopPolling(); setMode("done", "finished"); }
          return applyJob({ status: r[1].status, colour: r[1].colour, summary: r[1].summary, started: r[1].started,
                            finished: r[1].finished, cancel_requested: r[1].cancel_requested,
                            progress: Object.assign({}, r[1].progress, { counts: counts,
                                                              failed_nodes: Object.keys(failedHosts).length }) });
        });
      }).catch(function (e) { console.warn(e); });
    }
    function startPolling() {
      if (state.pollTimer) { return; }
      setMode("polling", "polling (live updates unavailable)");
      poll();
      state.pollTimer = setInterval(poll, 2000);
    }
    function stopPolling() { if (state.pollTimer) { clearInterval(state.pollTimer); state.pollTimer = null; } }

    nodeFilter.addEventListener("change", function () {
      var host = nodeFilter.value;
      Array.prototype.forEach.call(log.children, function (row) { row.hidden = !!(host && row.dataset.host && row.dataset.host !== host); });
    });
    matrix.addEventListener("click", function (e) {
      var cell = e.target.closest("td.cell");
      if (!cell) { return; }
      // One listener for every cell (a 100-node page has thousands): the cell's output below the matrix.
      var url = matrix.dataset.cellUrl.replace("__host__", encodeURIComponent(cell.dataset.host))
        .replace("__step__", encodeURIComponent(cell.dataset.step));
      if (window.htmx) { window.htmx.ajax("GET", url, { target: "#cell-output" }); }
      if (nodeFilter.value !== cell.dataset.host) { nodeFilter.value = cell.dataset.host; nodeFilter.dispatchEvent(new Event("change")); }
    });

    // Initial render from the page itself (never blank), then live from lastSeq on.
    if (initial.first_seq > 1) {
      var note = document.createElement("div");
      note.className = "ev muted";
      note.textContent = "… " + (initial.first_seq - 1) + " earlier events: see the API or filter by node";
      log.appendChild(note);
      state.lastSeq = initial.first_seq - 1;
    }
    initial.events.forEach(addEvent);
    scroll();
    connect();

    window.rackpilotJob = {
      state: state,
      seqs: function () { return state.seqs.slice(); },
      socket: function () { return state.ws; },
      dropSocket: function () { if (state.ws) { state.ws.close(); } },
    };
  }

  function list() {
    var tbody = document.getElementById("job-rows");
    var table = document.getElementById("job-table");
    var note = document.getElementById("live-note");
    var refreshing = null;
    function refreshRows() {
      if (refreshing) { return; }
      refreshing = setTimeout(function () {
        fetch(table.dataset.rowsUrl, { credentials: "same-origin", headers: { "HX-Request": "true" } })
          .then(function (r) { return r.text(); })
          .then(function (html) { tbody.innerHTML = html; })
          .finally(function () { refreshing = null; });
      }, 300);
    }
    function apply(job) {
      var row = tbody.querySelector('tr[data-job="' + job.id + '"]');
      if (!row) { refreshRows(); return; }
      setBadge(row.querySelector('[data-field="status"]'), job.status, job.colour);
      if (job.progress) {
        var bar = row.querySelector('[data-field="bar"]');
        bar.style.width = job.progress.percent + "%";
        bar.className = "bar " + (job.colour || "");
        row.querySelector('[data-field="percent"]').textContent = job.progress.percent + "%";
      }
      row.querySelector('[data-field="summary"]').textContent = job.summary || "";
    }
    var failures = 0, poller = null;
    function connect() {
      var ws = new WebSocket(wsUrl("/ws/jobs/"));
      var opened = false;
      ws.onopen = function () { opened = true; failures = 0; note.textContent = "live"; if (poller) { clearInterval(poller); poller = null; } };
      ws.onmessage = function (msg) { var frame = JSON.parse(msg.data); if (frame.type === "status") { apply(frame.job); } };
      ws.onclose = function (e) {
        if (REFUSED[e.code]) { note.textContent = REFUSED[e.code]; return; }
        if (e.code === CLOSE_UNAVAILABLE) { opened = false; failures = Math.max(failures, 2); }
        if (!opened) { failures += 1; }
        if (failures >= 3 && !poller) { note.textContent = "polling"; poller = setInterval(refreshRows, 5000); }
        setTimeout(function () { if (opened) { refreshRows(); } connect(); }, Math.min(30000, 1000 * Math.pow(2, failures)));
      };
    }
    if ("WebSocket" in window) { connect(); } else { note.textContent = "polling"; setInterval(refreshRows, 5000); }
  }

  // The socket helpers other live pages share (the incident page: static/js/incidents.js).
  window.RackpilotJobs = { detail: detail, list: list, wsUrl: wsUrl, refused: REFUSED, closeUnavailable: CLOSE_UNAVAILABLE };
})();
