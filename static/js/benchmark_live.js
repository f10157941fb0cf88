/* The benchmark run page's live plot: while the run is active, each round's job streams its events over the jobs
   websocket (ws/jobs/<id>/, replayed from the start); every nccl-tests row in a launcher's output adds its
   out-of-place bus bandwidth to that test's line, so the figure extends as rows arrive, without a reload. The round
   jobs come from #round-jobs in the results part (htmx reloads it every 2 s, adding the rounds as they start).
   A row whose size is not above the line's last starts a new line (a confirm test's one-rail runs). */
(function () {
  "use strict";

  // size count type redop root | time algbw busbw #wrong (out-of-place) | ... (in-place); Open MPI's tag stripped.
  var ROW = /^\s*(\d+)\s+(\d+)\s+\w+\s+\w+\s+-?\d+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+\S+/;
  var TAG = /^\[\d+,\d+\]<stdout>:/;
  var TERMINAL = { succeeded: true, failed: true, error: true, canceled: true };
  var state = { sockets: {}, ended: {}, lines: [], byKey: {}, labels: {}, points: 0, drawn: false };
  var element = null;

  function wsUrl(path) { return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path; }

  function draw() {
    if (!window.Plotly || !element) { return; }
    if (!state.drawn) {
      var figure = JSON.parse(document.getElementById(element.getAttribute("data-live-figure")).textContent);
      window.Plotly.newPlot(element, [], figure.layout || {}, { responsive: true, displaylogo: false });
      state.drawn = true;
    }
  }

  function lineFor(key, size) {
    var index = state.byKey[key];
    var line = index === undefined ? null : state.lines[index];
    if (line && line.x.length && size > line.x[line.x.length - 1]) { return index; }
    var count = state.lines.filter(function (l) { return l.key === key; }).length;
    state.lines.push({ key: key, x: [], y: [] });
    index = state.byKey[key] = state.lines.length - 1;
    window.Plotly.addTraces(element, {
      x: [], y: [], mode: "lines+markers", name: key + (count ? " #" + (count + 1) : ""),
      hovertemplate: "%{x} B: %{y:.1f} GB/s<extra>" + key + "</extra>"
    });
    return index;
  }

  // "1 row", "3 rows": the count and its noun (apps/core/text.py counted() says the same on the server).
  function rows(count) { return count + (count === 1 ? " row" : " rows"); }

  // A launcher's rows are its test's, named as the results name it ("gpu001 +7"; #round-labels, per round job).
  function testName(id, hostname) {
    return (state.labels[id] || {})[hostname] || hostname;
  }

  function addRow(id, jobIndex, event) {
    var match = ROW.exec((event.message || "").replace(TAG, ""));
    if (!match) { return; }
    var size = Number(match[1]);
    var busbw = Number(match[3]);
    var index = lineFor("round " + jobIndex + " " + testName(id, event.hostname), size);
    state.lines[index].x.push(size);
    state.lines[index].y.push(busbw);
    window.Plotly.extendTraces(element, { x: [[size]], y: [[busbw]] }, [index]);
    state.points += 1;
    document.getElementById("live-state").textContent = rows(state.points) + " so far";
  }

  function watch(id, jobIndex) {
    if (state.sockets[id] || !("WebSocket" in window)) { return; }
    var ws = new WebSocket(wsUrl("/ws/jobs/" + id + "/"));
    var seen = 0, endsAt = null;
    state.sockets[id] = ws;
    ws.onmessage = function (msg) {
      var frame = JSON.parse(msg.data);
      (frame.events || []).forEach(function (event) {
        seen = Math.max(seen, event.seq || 0);
        if (event.level === "output") { addRow(id, jobIndex, event); }
      });
      if (frame.job && TERMINAL[frame.job.status]) { endsAt = frame.job.last_seq || 0; }
      // A round that has ended says so first (the socket's state frame), then replays its events: the socket is
      // closed once they are all here, not at the first frame (a fast run's early rounds plotted nothing).
      if (endsAt !== null && seen >= endsAt) {
        ws.close();
        state.ended[id] = true;
        // Every round's job has ended: the count is final, not "so far".
        if (Object.keys(state.sockets).every(function (key) { return state.ended[key]; })) {
          document.getElementById("live-state").textContent = rows(state.points) + "; the run has ended";
        }
      }
    };
  }

  function scan() {
    var holder = document.getElementById("round-jobs");
    if (!holder || !element) { return; }
    draw();
    var labels = document.getElementById("round-labels");  // read once a swap, not once a row
    if (labels) { state.labels = JSON.parse(labels.textContent); }
    holder.getAttribute("data-jobs").split(" ").filter(Boolean).forEach(function (id, index) { watch(id, index + 1); });
  }

  function start() {
    element = document.getElementById("live-busbw");
    scan();
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
  document.addEventListener("htmx:afterSwap", scan);
  window.rackpilotBenchLive = {
    points: function () { return state.points; },
    lines: function () { return state.lines.map(function (l) { return { key: l.key, x: l.x.slice(), y: l.y.slice() }; }); },
    watched: function () { return Object.keys(state.sockets); }
  };
})();
