// Conveyor health page: fetches the metrics JSON and draws SVG charts. No libraries (the page must
// work offline) and no innerHTML: every value from the ledger is written as text.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  // The API lives beside the page's script: <mount>/health/static/health.js -> <mount>/api/metrics.
  const BASE = new URL("../../", document.currentScript.src);
  const STAGE_COLORS = { gate: "#8e6bd1", model: "#2f80ed", review: "#e8833a", approval: "#27ae60", publish: "#95a5a6" };
  const W = 560, H = 220, M = { top: 10, right: 12, bottom: 34, left: 56 };

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function svgEl(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function api(path, params) {
    const url = new URL(path, BASE);
    for (const [k, v] of Object.entries(params || {})) url.searchParams.set(k, v);
    return fetch(url, { credentials: "same-origin" }).then((r) => {
      if (!r.ok) return r.text().then((t) => { throw new Error(`${url.pathname}: HTTP ${r.status} ${t.slice(0, 200)}`); });
      return r.json();
    });
  }

  // -- formatting ------------------------------------------------------------------------------

  function duration(s) {
    if (s === null || s === undefined) return "n/a";
    if (s < 90) return `${Math.round(s)} s`;
    if (s < 5400) return `${Math.round(s / 60)} min`;
    if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
    return `${(s / 86400).toFixed(1)} d`;
  }
  const share = (v) => (v === null || v === undefined ? "n/a" : `${Math.round(v * 1000) / 10}%`);
  const count = (v) => (v === null || v === undefined ? "n/a" : String(Math.round(v * 10) / 10));
  function when(iso) {
    const d = new Date(iso);
    return `${d.getUTCMonth() + 1}/${d.getUTCDate()} ${String(d.getUTCHours()).padStart(2, "0")}:00`;
  }

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 4, 8, 10]) if (m * p >= v) return m * p;  // quarters stay round
    return 10 * p;
  }

  // One unit for a whole time axis (so its ticks read "0, 1, 2, 3, 4 min", never "3 min, 3 min,
  // 2 min, 50 s"): the largest unit the axis top reaches, and a round top in that unit.
  const UNITS = [[86400, "d"], [3600, "h"], [60, "min"], [1, "s"]];
  function durationAxis(maxSeconds) {
    const [size, name] = UNITS.find(([u]) => maxSeconds >= 2 * u) || UNITS[UNITS.length - 1];
    const top = maxSeconds > 0 ? niceMax(maxSeconds / size) : 4;  // an empty chart: 0 to 4 s
    const quarter = top / 4;
    const digits = Number.isInteger(quarter) ? 0 : Number.isInteger(Math.round(quarter * 1e6) / 1e5) ? 1 : 2;
    return { max: top * size, label: (v) => `${Number((v / size).toFixed(digits))} ${name}` };
  }

  // -- charts ----------------------------------------------------------------------------------

  // series: [{name, color, type: "bar" | "line", values: [number|null], stack?: true}]
  // axis "duration": values are seconds, the y axis gets one unit (see durationAxis).
  function drawChart(container, labels, series, format, integer, axis) {
    container.replaceChildren();
    const heading = container.parentElement.querySelector("h2");
    const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": heading ? heading.textContent : "" });
    const iw = W - M.left - M.right, ih = H - M.top - M.bottom;
    const n = labels.length;
    const stacked = series.filter((s) => s.stack);
    let max = 0;
    for (let i = 0; i < n; i++) {
      let stackSum = 0;
      for (const s of series) {
        const v = s.values[i] || 0;
        if (s.stack) stackSum += v; else max = Math.max(max, v);
      }
      max = Math.max(max, stackSum);
    }
    let tick = format;
    if (axis === "duration") {
      const time = durationAxis(max);
      max = time.max;
      tick = time.label;
    } else {
      max = niceMax(integer ? Math.max(max, 4) : max);  // counts: whole-number grid lines
    }
    const x = (i) => M.left + (n ? (i + 0.5) * (iw / n) : 0);
    const y = (v) => M.top + ih - (v / max) * ih;
    // grid and y labels
    for (let k = 0; k <= 4; k++) {
      const v = (max * k) / 4;
      svg.append(svgEl("line", { x1: M.left, x2: W - M.right, y1: y(v), y2: y(v), stroke: "#e4e7eb" }));
      svg.append(svgEl("text", { x: M.left - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#616e7c" }, tick(v)));
    }
    // x labels: about six
    const step = Math.max(1, Math.ceil(n / 6));
    for (let i = 0; i < n; i += step) {
      svg.append(svgEl("text", { x: x(i), y: H - 12, "text-anchor": "middle", "font-size": 11, fill: "#616e7c" }, when(labels[i])));
    }
    const bw = Math.max(1, (iw / Math.max(n, 1)) * 0.7);
    let drawn = 0;
    // bars: stacked ones on top of each other, a single unstacked bar series alone
    const base = new Array(n).fill(0);
    for (const s of series.filter((s) => s.type === "bar")) {
      const g = svgEl("g", { "data-series": s.name });
      for (let i = 0; i < n; i++) {
        const v = s.values[i];
        if (v === null || v === undefined) continue;
        const bottom = s.stack ? base[i] : 0;
        const rect = svgEl("rect", {
          x: x(i) - bw / 2, y: y(bottom + v), width: bw, height: Math.max(0, y(bottom) - y(bottom + v)), fill: s.color,
        });
        rect.append(svgEl("title", {}, `${when(labels[i])} · ${s.name}: ${format(v)}`));
        g.append(rect);
        if (s.stack) base[i] += v;
        drawn++;
      }
      svg.append(g);
    }
    for (const s of series.filter((s) => s.type === "line")) {
      const g = svgEl("g", { "data-series": s.name });
      let d = "";
      for (let i = 0; i < n; i++) {
        const v = s.values[i];
        if (v === null || v === undefined) continue;
        d += `${d ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
        const dot = svgEl("circle", { cx: x(i), cy: y(v), r: 2.5, fill: s.color });
        dot.append(svgEl("title", {}, `${when(labels[i])} · ${s.name}: ${format(v)}`));
        g.append(dot);
        drawn++;
      }
      if (d) g.prepend(svgEl("path", { d, fill: "none", stroke: s.color, "stroke-width": 2 }));
      svg.append(g);
    }
    container.append(svg);
    const legend = el("div", { class: "legend" });
    for (const s of series) {
      const item = el("span");
      const swatch = el("i");
      swatch.style.background = s.color;
      item.append(swatch, document.createTextNode(s.name));
      legend.append(item);
    }
    container.append(legend);
    container.dataset.points = String(drawn);
    if (stacked.length === 0 && drawn === 0) container.append(el("p", { class: "empty" }, "no data in this period"));
  }

  // -- sections --------------------------------------------------------------------------------

  function card(title, value, note) {
    const c = el("div", { class: "card" });
    c.append(el("div", { class: "note" }, title), el("div", { class: "value" }, value), el("div", { class: "note" }, note));
    return c;
  }

  function renderCards(h) {
    const tp = h.throughput, ex = h.exceptions, q = h.queue, cyc = h.cycle;
    $("cards").replaceChildren(
      card(`Throughput, last ${h.window_hours} h`, count(tp.current), `usual ${count(tp.baseline)} (same hours, previous ${h.baseline_days} days)`),
      card("Exception rate", share(ex.rate), `${ex.exceptions} of ${ex.received} received; usual ${share(ex.baseline_rate)}`),
      card("Cycle time p95", duration(cyc.current.total.p95), `p50 ${duration(cyc.current.total.p50)}; usual p95 ${duration(cyc.baseline.total.p95)}`),
      card("Review queue", `${q.size} waiting`, `oldest ${duration(q.oldest_age_s)}; ${q.over_bound} over ${duration(q.bound_s)}`),
    );
  }

  function table(headers, rows) {
    const t = el("table");
    const head = el("tr");
    for (const h of headers) head.append(el("th", {}, h));
    t.append(head);
    for (const row of rows) {
      const tr = el("tr");
      for (const cell of row) {
        const td = el("td");
        if (cell instanceof Node) td.append(cell); else td.textContent = cell === null || cell === undefined ? "" : String(cell);
        tr.append(td);
      }
      t.append(tr);
    }
    return t;
  }

  function progressBar(done, received, state) {
    const svg = svgEl("svg", { width: 110, height: 12, viewBox: "0 0 110 12", role: "img" });
    const part = received ? done / received : 0;
    svg.append(svgEl("rect", { x: 0, y: 0, width: 110, height: 12, rx: 3, fill: state === "failed" ? "#f5c6c6" : "#e4e7eb" }));
    svg.append(svgEl("rect", { x: 0, y: 0, width: (110 * part).toFixed(1), height: 12, rx: 3, fill: "#27ae60" }));
    svg.append(svgEl("title", {}, `${done} of ${received} done`));
    return svg;
  }

  // The run's Airflow state beside its ledger numbers: a failed run whose items never moved reads
  // "failed", not just "0 of 480".
  function runCell(r) {
    const cell = el("div", { class: "run" });
    cell.append(el("span", { class: "run-id", title: r.run_id }, r.run_id));
    if (r.state) cell.append(el("span", { class: `run-state state-${String(r.state).replace(/[^a-z_]/g, "")}` }, r.state));
    return cell;
  }

  function renderRuns(runs) {
    const box = $("runs");
    if (!runs.length) { box.replaceChildren(el("p", { class: "empty" }, "no runs in the last 30 days")); return; }
    const wrap = el("div", { class: "table-wrap" });
    wrap.append(table(
      ["run", "started", "progress", "done", "in review", "stopped"],
      runs.map((r) => [runCell(r), when(r.started), progressBar(r.done, r.received, r.state), `${r.done} of ${r.received}`, r.in_review, r.stopped]),
    ));
    box.replaceChildren(wrap);
  }

  function renderSources(ex) {
    const rows = ex.sources.filter((s) => s.received > 0);
    if (!rows.length) { $("sources").replaceChildren(el("p", { class: "empty" }, "no items received in the window")); return; }
    $("sources").replaceChildren(table(
      [ex.source_field, "exceptions", "of received", "rate", "usual rate"],
      rows.map((s) => [s.source, s.exceptions, s.received, share(s.rate), share(s.baseline_rate)]),
    ));
  }

  function renderAlerts(open) {
    if (!open.length) { $("alerts").replaceChildren(el("p", { class: "empty" }, "none")); return; }
    $("alerts").replaceChildren(table(
      ["severity", "alert", "since"],
      open.map((a) => [el("span", { class: `alert-${a.severity}` }, a.severity), a.title, when(a.opened_at)]),
    ));
  }

  function renderSeries(s) {
    const labels = s.points.map((p) => p.start);
    const pick = (k) => s.points.map((p) => p[k]);
    drawChart($("chart-throughput"), labels, [{ name: "completed", color: "#2f80ed", type: "bar", values: pick("throughput") }], count, true);
    drawChart($("chart-exceptions"), labels, [{ name: "exception rate", color: "#c62828", type: "line", values: pick("exception_rate") }], share);
    const stageSeries = s.stages.map((stage) => ({
      name: `${stage} (mean)`, color: STAGE_COLORS[stage] || "#999", type: "bar", stack: true,
      values: s.points.map((p) => (p.cycle_items ? p.stage_mean[stage] : null)),
    }));
    stageSeries.push({ name: "p95 total", color: "#1f2933", type: "line", values: pick("cycle_p95") });
    drawChart($("chart-cycle"), labels, stageSeries, duration, false, "duration");
    drawChart($("chart-queue"), labels, [{ name: "items waiting", color: "#e8833a", type: "bar", values: pick("queue_size") }], count, true);
    drawChart($("chart-age"), labels, [{ name: "oldest wait", color: "#8e6bd1", type: "line", values: pick("queue_oldest_age_s") }], duration, false, "duration");
  }

  // -- the guardrail measured: one threshold curve per AI step ---------------------------------

  // x: share sent to review; y: estimated error of what passes (solid) and its 95% upper bound
  // (dashed); a dashed red line at the declared target; rings on the step's own threshold and on
  // the recommended one.
  function drawCurve(step) {
    const panel = el("div", { class: "panel", "data-step": step.step });
    panel.append(el("h2", {}, `${step.step}`));
    const points = step.curve.filter((p) => p.passed_error !== null);
    const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `threshold curve of ${step.step}` });
    const iw = W - M.left - M.right, ih = H - M.top - M.bottom;
    const top = Math.min(1, niceMax(Math.max(step.max_error_rate || 0, ...points.map((p) => Math.min(p.passed_error_upper, 0.5)), 0.01) * 1.1));
    const x = (v) => M.left + v * iw;
    const y = (v) => M.top + ih - (Math.min(v, top) / top) * ih;
    for (let k = 0; k <= 4; k++) {
      const v = (top * k) / 4;
      svg.append(svgEl("line", { x1: M.left, x2: W - M.right, y1: y(v), y2: y(v), stroke: "#e4e7eb" }));
      svg.append(svgEl("text", { x: M.left - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#616e7c" }, share(v)));
      svg.append(svgEl("text", { x: x(k / 4), y: H - 16, "text-anchor": k === 4 ? "end" : "middle", "font-size": 11, fill: "#616e7c" }, share(k / 4)));
    }
    svg.append(svgEl("text", { x: M.left + iw / 2, y: H - 2, "text-anchor": "middle", "font-size": 11, fill: "#616e7c" }, "share sent to review"));
    if (step.max_error_rate !== null) {
      svg.append(svgEl("line", { x1: M.left, x2: W - M.right, y1: y(step.max_error_rate), y2: y(step.max_error_rate),
        stroke: "#c62828", "stroke-dasharray": "6 4", "data-series": "target" }));
      svg.append(svgEl("text", { x: W - M.right - 4, y: y(step.max_error_rate) - 4, "text-anchor": "end", "font-size": 11, fill: "#c62828" },
        `target ${share(step.max_error_rate)}`));
    }
    const path = (key) => points.map((p, i) => `${i ? "L" : "M"}${x(p.review_share).toFixed(1)},${y(p[key]).toFixed(1)}`).join("");
    if (points.length) {
      svg.append(svgEl("path", { d: path("passed_error_upper"), fill: "none", stroke: "#2f80ed", "stroke-width": 1.5, "stroke-dasharray": "4 3", "data-series": "upper" }));
      svg.append(svgEl("path", { d: path("passed_error"), fill: "none", stroke: "#2f80ed", "stroke-width": 2, "data-series": "estimate" }));
    }
    for (const p of points) {
      const dot = svgEl("circle", { cx: x(p.review_share), cy: y(p.passed_error), r: 2.5, fill: "#2f80ed" });
      dot.append(svgEl("title", {}, `min_confidence ${p.min_confidence.toFixed(2)}: ${share(p.review_share)} to review, ` +
        `error ${share(p.passed_error)} (upper ${share(p.passed_error_upper)}, sample ${p.sample})`));
      svg.append(dot);
    }
    const mark = (threshold, color, label) => {
      const p = points.find((q) => Math.abs(q.min_confidence - threshold) < 1e-9);
      if (!p) return;
      svg.append(svgEl("circle", { cx: x(p.review_share), cy: y(p.passed_error_upper), r: 6, fill: "none", stroke: color, "stroke-width": 2, "data-mark": label }));
      svg.append(svgEl("text", { x: x(p.review_share) + 8, y: y(p.passed_error_upper) - 8, "font-size": 11, fill: color }, `${label} ${threshold.toFixed(2)}`));
    };
    if (step.min_confidence !== null) mark(step.min_confidence, "#1f2933", "now");
    if (step.recommended_min_confidence !== null) mark(step.recommended_min_confidence, "#1b7a3d", "recommended");
    const chart = el("div", { class: "chart", "data-points": String(points.length) });
    chart.append(svg);
    panel.append(chart);
    const over = step.max_error_rate !== null && step.passed_error_upper > step.max_error_rate;
    const numbers = el("p", { class: "numbers" });
    numbers.append(el("span", over ? { class: "over" } : {},
      `passed unreviewed: error ${share(step.passed_error_rate)}, 95% upper bound ${share(step.passed_error_upper)}`),
      document.createTextNode(` from ${step.spot_checked} spot checks (${step.spot_wrong} wrong); exceptions ${share(step.exception_rate)};` +
        ` reviewers found ${share(step.reviewed_error_rate)} of doubtful answers wrong; ` +
        (step.recommended_min_confidence !== null
          ? `recommended min_confidence ${step.recommended_min_confidence.toFixed(2)} (now ${step.min_confidence})`
          : "no threshold meets the target yet")));
    panel.append(numbers);
    if (!points.length) panel.append(el("p", { class: "empty" }, "no decided answers in this period"));
    return panel;
  }

  function renderAccuracy(report) {
    const box = $("accuracy");
    if (!report.steps.length) { box.replaceChildren(el("p", { class: "empty" }, "no AI step has recorded answers")); return; }
    box.replaceChildren(...report.steps.map(drawCurve));
  }

  function setStatus(text, error) {
    const status = $("status");
    status.textContent = text;
    status.className = error ? "error" : "";
  }

  async function load() {
    const workflow = $("workflow").value;
    if (!workflow) { setStatus("no workflow has activity yet"); document.body.dataset.state = "empty"; return; }
    const days = Number($("days").value);
    const bucket = days <= 2 ? 1 : days <= 7 ? 6 : days <= 14 ? 12 : 24;
    document.body.dataset.state = "loading";
    setStatus(`Loading ${workflow}…`);
    const [health, series, accuracy] = await Promise.all([
      api(`api/metrics/${encodeURIComponent(workflow)}`),
      api(`api/metrics/${encodeURIComponent(workflow)}/series`, { days, bucket_hours: bucket }),
      api(`api/metrics/${encodeURIComponent(workflow)}/accuracy`, { days }),
    ]);
    renderCards(health);
    renderSeries(series);
    renderRuns(health.runs);
    renderSources(health.exceptions);
    renderAlerts(health.open_alerts);
    renderAccuracy(accuracy);
    setStatus(`${workflow} as of ${new Date(health.as_of).toISOString().slice(0, 16).replace("T", " ")} UTC · ${bucket} h buckets`);
    document.body.dataset.state = "ready";
  }

  function fail(err) {
    setStatus(`Could not load the health numbers: ${err.message}`, true);
    document.body.dataset.state = "error";
  }

  async function start() {
    const all = await api("api/metrics");
    const select = $("workflow");
    const wanted = new URLSearchParams(location.search).get("workflow");
    const names = all.workflows.map((w) => w.workflow);
    if (wanted && !names.includes(wanted)) names.unshift(wanted);
    for (const name of names) select.append(el("option", { value: name }, name));
    if (wanted) select.value = wanted;
    select.addEventListener("change", () => load().catch(fail));
    $("days").addEventListener("change", () => load().catch(fail));
    await load();
  }

  start().catch(fail);
})();
