// The dashboard's few lines of script: live updates from the event stream, and the charts.
"use strict";

// Live: each message of /api/v1/events/stream (named by its event) fires `jl:changed` on
// the body; the fragments that listen for it (hx-trigger="jl:changed from:body") fetch
// themselves again. The page's data-stream narrows the stream (a job page: job=<id>).
function connectStream() {
  const body = document.body;
  if (body.dataset.live !== "true" || !window.EventSource) return;
  const filter = body.dataset.stream;
  const source = new EventSource("/api/v1/events/stream" + (filter ? "?" + filter : ""));
  const state = document.getElementById("live-state");
  const changed = () => htmx.trigger(body, "jl:changed");
  for (const name of body.dataset.events.split(" ")) {
    if (name) source.addEventListener(name, changed);
  }
  source.addEventListener("message", changed);
  source.addEventListener("open", () => { state.textContent = "live"; state.className = "live-state on"; });
  source.addEventListener("error", () => { state.textContent = "reconnecting"; state.className = "live-state off"; });
  window.addEventListener("pagehide", () => source.close());
}

// Charts: uPlot over the columns the overview renders as JSON (drawings/series.py).
const CHARTS = {
  throughput: (data) => ({
    series: [{}, { label: "succeeded", stroke: "#2e7d32" }, { label: "failed", stroke: "#ef6c00" },
             { label: "dead", stroke: "#c62828" }],
    data: [data.minutes, data.succeeded, data.failed, data.dead],
    axes: [{}, { label: "per minute" }],
  }),
  latency: (data) => ({
    // a minute without successes has no run time: points, not a line through the gap
    series: [{}, { label: "p50 s", stroke: "#1565c0", points: { show: true, size: 6 } },
             { label: "p95 s", stroke: "#6a1b9a", points: { show: true, size: 6 } }],
    data: [data.minutes, data.run_p50_s, data.run_p95_s],
    axes: [{}, { label: "seconds" }],
  }),
};

function drawCharts(root) {
  if (!window.uPlot) return;
  for (const element of root.querySelectorAll("[data-chart]")) {
    const source = document.getElementById(element.dataset.series);
    if (!source) continue;
    const options = CHARTS[element.dataset.chart](JSON.parse(source.textContent));
    element.replaceChildren();
    const width = Math.max(element.clientWidth || 0, 300);
    new uPlot({ width: width, height: 180, series: options.series, axes: options.axes },
              options.data, element);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  connectStream();
  drawCharts(document);
});
document.addEventListener("htmx:afterSettle", (event) => drawCharts(event.target));
