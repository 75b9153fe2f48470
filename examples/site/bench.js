// The bench page: `bench()` on this browser's GPU — every strategy on synthetic toy models (and
// optionally a real GGUF), shown as a table, an SVG bar chart drawn here, and a JSON download.
// On software adapters (SwiftShader, lavapipe) the defaults shrink to the smallest toy sizes and one
// measured run, since those decode at a few tokens per second.
// Query parameters: ?runs=N&small=0|1&toy=0|1&toyTokens=N&model=URL&chunkTokens=N, and ?autorun
// starts at once;
// ?report=URL shows a saved report (`fuselm bench --out` JSON, or this page's download) instead.
// In your own site: `import { bench } from "fuselm"`.
import { bench, probe } from "../../dist/index.js";
import { $, chip, clearError, download, fmtBytes, fmtNumber, rows, showError } from "./ui.js";

const params = new URLSearchParams(location.search);
const SVG = "http://www.w3.org/2000/svg";
const colors = { unfused: "#9b9bb0", fused: "#5546d6", megakernel: "#0b8a6d" };
const palette = ["#0b8a6d", "#d97706", "#c2410c", "#2563eb"];
const colorOf = (strategy, i) => colors[strategy] ?? palette[i % palette.length];

let adapter; // AdapterIdentity from probe(), once known
let last; // what the Download button saves

function applyParams() {
  if (params.has("runs")) $("runs").value = params.get("runs");
  if (params.has("small")) $("small-toy").checked = params.get("small") !== "0";
  if (params.has("toy")) $("toy").checked = params.get("toy") !== "0";
  if (params.has("toyTokens")) $("toy-tokens").value = params.get("toyTokens");
  if (params.has("model")) $("model").value = params.get("model");
  if (params.has("chunkTokens")) $("chunk-tokens").value = params.get("chunkTokens");
}

async function identify() {
  try {
    adapter = (await probe()).adapter;
    const name = adapter.description || [adapter.vendor, adapter.architecture].filter(Boolean).join(" ") || "unknown adapter";
    $("adapter").replaceChildren(`Adapter: ${name} (${adapter.backend}) `, chip(adapter.isSoftware ? "software" : "hardware", !adapter.isSoftware));
    if (adapter.isSoftware) {
      // A CPU implementation of WebGPU: a small run, or this takes many minutes.
      $("runs").value = "1";
      $("small-toy").checked = true;
      $("toy-tokens").value = "8";
      $("adapter").append(" — a CPU adapter: the defaults are a small run (the smallest toy sizes at one layer, 8 tokens each, one measured run).");
    }
  } catch {
    // bench() itself reports the typed error when there is no adapter.
  }
}

function options() {
  const o = {
    runs: Number($("runs").value) || 1,
    toy: $("toy").checked,
    smallToy: $("small-toy").checked,
    toyTokens: Number($("toy-tokens").value) || undefined,
    chunkTokens: Number($("chunk-tokens").value) || undefined,
  };
  const model = $("model").value.trim();
  if (model) Object.assign(o, { longContext: $("long-context").checked, profile: $("profile").checked });
  for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
  return { options: o, model: model || undefined };
}

// ---------------------------------------------------------------- rendering

function workloads(report) {
  const order = [];
  for (const r of report.results) if (!order.includes(r.workload)) order.push(r.workload);
  return order;
}

function strategies(report) {
  const order = [];
  for (const r of report.results) if (!order.includes(r.strategy)) order.push(r.strategy);
  // The baseline first, as in the CLI's table.
  return order.sort((a, b) => (a === "unfused" ? -1 : b === "unfused" ? 1 : 0));
}

function niceStep(max, ticks = 5) {
  const raw = max / ticks;
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? raw;
}

function el(name, attrs = {}, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Horizontal grouped bars: one group per workload, one bar per strategy, min–max whiskers. */
function drawChart(report) {
  const works = workloads(report);
  const strats = strategies(report);
  const bar = 16, gap = 4, groupGap = 18, left = 190, right = 60, top = 10, axis = 42, width = 760;
  const groupHeight = strats.length * (bar + gap) - gap;
  const height = top + works.length * (groupHeight + groupGap) - groupGap + axis;
  const max = Math.max(1e-9, ...report.results.map((r) => r.decodeTokensPerSecond.max));
  const step = niceStep(max);
  const top1 = Math.ceil(max / step) * step;
  const x = (v) => left + (v / top1) * (width - left - right);

  const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", "aria-label": "decode tokens per second per strategy and workload" });
  const plotBottom = height - axis;
  for (let v = 0; v <= top1 + 1e-9; v += step) {
    svg.append(el("line", { x1: x(v), x2: x(v), y1: top - 4, y2: plotBottom, class: "grid-line" }));
    svg.append(el("text", { x: x(v), y: plotBottom + 16, "text-anchor": "middle" }, fmtNumber(v, 1)));
  }
  svg.append(el("line", { x1: left, x2: left, y1: top - 4, y2: plotBottom, class: "axis" }));
  works.forEach((w, gi) => {
    const y0 = top + gi * (groupHeight + groupGap);
    svg.append(el("text", { x: left - 8, y: y0 + groupHeight / 2 + 4, "text-anchor": "end" }, w));
    strats.forEach((s, si) => {
      const r = report.results.find((row) => row.workload === w && row.strategy === s);
      if (!r) return;
      const d = r.decodeTokensPerSecond;
      const y = y0 + si * (bar + gap);
      const rect = el("rect", { x: left, y, width: Math.max(1, x(d.median) - left), height: bar, rx: 3, fill: colorOf(s, si) });
      rect.append(el("title", {}, `${w} · ${s}: ${fmtNumber(d.median)} tok/s (min ${fmtNumber(d.min)}, max ${fmtNumber(d.max)})`));
      svg.append(rect);
      if (d.max > d.min) {
        const cy = y + bar / 2;
        svg.append(el("line", { x1: x(d.min), x2: x(d.max), y1: cy, y2: cy, class: "whisker" }));
        for (const v of [d.min, d.max]) svg.append(el("line", { x1: x(v), x2: x(v), y1: cy - 4, y2: cy + 4, class: "whisker" }));
      }
      svg.append(el("text", { x: x(Math.max(d.median, d.max)) + 5, y: y + bar / 2 + 4, class: "value" }, fmtNumber(d.median)));
    });
  });
  svg.append(el("text", { x: width - right, y: height - 2, "text-anchor": "end" }, "decode tok/s (median, min–max)"));
  $("chart").replaceChildren(svg);
  $("legend").replaceChildren(
    ...strats.map((s, i) => {
      const span = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = colorOf(s, i);
      span.append(swatch, s);
      return span;
    }),
  );
}

/** A row's end-to-end tok/s (reports before the megakernel have only decode tok/s). */
const endToEnd = (r) => (r.endToEndTokensPerSecond ?? r.decodeTokensPerSecond).median;

/**
 * Where the fastest strategy changes along the weight-bytes axis: for each pair of neighbouring
 * workloads with different winners, the bytes at which the two strategies' lines cross
 * (interpolated on the log-log plot). Exported for the page's test through `window`.
 */
export function crossovers(report) {
  const byBytes = new Map();
  for (const r of report.results) {
    if (!(endToEnd(r) > 0)) continue;
    const key = `${r.weightBytesPerToken}|${r.workload}`;
    if (!byBytes.has(key)) byBytes.set(key, { bytes: r.weightBytesPerToken, workload: r.workload, rows: [] });
    byBytes.get(key).rows.push(r);
  }
  const points = [...byBytes.values()].sort((a, b) => a.bytes - b.bytes);
  for (const p of points) p.winner = p.rows.reduce((a, b) => (endToEnd(a) >= endToEnd(b) ? a : b)).strategy;
  const out = [];
  for (let i = 1; i < points.length; i++) {
    const [a, b] = [points[i - 1], points[i]];
    if (a.winner === b.winner) continue;
    // log(tps_from / tps_to) at both ends; the line between them crosses zero in log-bytes.
    const ratio = (p) => {
      const of = (s) => p.rows.find((r) => r.strategy === s);
      const [f, t] = [of(a.winner), of(b.winner)];
      return f && t ? Math.log(endToEnd(f) / endToEnd(t)) : undefined;
    };
    const [ra, rb] = [ratio(a), ratio(b)];
    let bytes = Math.sqrt(a.bytes * b.bytes);
    if (ra !== undefined && rb !== undefined && ra !== rb && a.bytes > 0 && b.bytes > 0) {
      const t = ra / (ra - rb);
      bytes = Math.exp(Math.log(a.bytes) + t * (Math.log(b.bytes) - Math.log(a.bytes)));
    }
    out.push({ from: a.winner, to: b.winner, bytes, between: [a.workload, b.workload] });
  }
  return { points, crossovers: out };
}

/** A row's series on the crossover chart: its workload without the width ("toy L4, 64 tokens"). */
const seriesOf = (r) => r.workload.replace(/\bd\d+\s+/, "");

/** Bytes in decimal units, as the README's crossover figures: 27.7 KB, 1.2 MB. */
function fmtDecimalBytes(n) {
  for (const [unit, size] of [["GB", 1e9], ["MB", 1e6], ["KB", 1e3]]) {
    if (n >= size) return `${fmtNumber(n / size, n / size >= 100 ? 0 : 1)} ${unit}`;
  }
  return `${fmtNumber(n, 0)} B`;
}

/** Log-log lines: end-to-end tok/s against weight bytes per token, one line per strategy. */
function drawCrossover(report) {
  const strats = strategies(report);
  const { points, crossovers: cross } = crossovers(report);
  const width = 760, height = 380, left = 64, right = 24, top = 14, bottom = 58;
  const rowsWith = report.results.filter((r) => endToEnd(r) > 0 && r.weightBytesPerToken > 0);
  if (rowsWith.length === 0) {
    $("crossover").replaceChildren();
    $("crossover-notes").replaceChildren();
    return;
  }
  const xs = rowsWith.map((r) => r.weightBytesPerToken);
  const ys = rowsWith.map(endToEnd);
  const decade = (v, up) => 10 ** (up ? Math.ceil(Math.log10(v)) : Math.floor(Math.log10(v)));
  let [x0, x1] = [decade(Math.min(...xs), false), decade(Math.max(...xs), true)];
  let [y0, y1] = [decade(Math.min(...ys), false), decade(Math.max(...ys), true)];
  if (x1 === x0) x1 = x0 * 10;
  if (y1 === y0) y1 = y0 * 10;
  const px = (v) => left + ((Math.log10(v) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0))) * (width - left - right);
  const py = (v) => height - bottom - ((Math.log10(v) - Math.log10(y0)) / (Math.log10(y1) - Math.log10(y0))) * (height - top - bottom);
  const svg = el("svg", {
    viewBox: `0 0 ${width} ${height}`, class: "chart crossover", role: "img",
    "aria-label": "end-to-end tokens per second against weight bytes per token, per strategy and depth",
  });
  for (let v = x0; v <= x1 * 1.0001; v *= 10) {
    svg.append(el("line", { x1: px(v), x2: px(v), y1: top, y2: height - bottom, class: "grid-line" }));
    svg.append(el("text", { x: px(v), y: height - bottom + 16, "text-anchor": "middle" }, fmtDecimalBytes(v)));
  }
  for (let v = y0; v <= y1 * 1.0001; v *= 10) {
    svg.append(el("line", { x1: left, x2: width - right, y1: py(v), y2: py(v), class: "grid-line" }));
    svg.append(el("text", { x: left - 6, y: py(v) + 4, "text-anchor": "end" }, fmtNumber(v, 0)));
  }
  svg.append(el("line", { x1: left, x2: left, y1: top, y2: height - bottom, class: "axis" }));
  svg.append(el("line", { x1: left, x2: width - right, y1: height - bottom, y2: height - bottom, class: "axis" }));
  for (const c of cross) {
    svg.append(el("line", { x1: px(c.bytes), x2: px(c.bytes), y1: top, y2: height - bottom, class: "limit-line crossover-line" }));
  }
  // One line per strategy and series (the same depth across widths: "toy L1", "toy L4"), so a
  // line shows how a strategy scales with width; dash patterns tell the series apart.
  const seriesNames = [];
  for (const r of rowsWith) if (!seriesNames.includes(seriesOf(r))) seriesNames.push(seriesOf(r));
  const dashes = ["", "6 4", "2 3", "8 3 2 3"];
  const dashOf = (name) => dashes[seriesNames.indexOf(name) % dashes.length];
  strats.forEach((s, i) => {
    const mine = rowsWith.filter((r) => r.strategy === s).sort((a, b) => a.weightBytesPerToken - b.weightBytesPerToken);
    for (const name of seriesNames) {
      const run = mine.filter((r) => seriesOf(r) === name);
      if (run.length < 2) continue;
      svg.append(el("polyline", {
        points: run.map((r) => `${px(r.weightBytesPerToken)},${py(endToEnd(r))}`).join(" "),
        stroke: colorOf(s, i), "stroke-dasharray": dashOf(name), "data-strategy": s, "data-series": name,
      }));
    }
    for (const r of mine) {
      const dot = el("circle", {
        cx: px(r.weightBytesPerToken), cy: py(endToEnd(r)), r: 3.5, fill: colorOf(s, i), class: "point",
        "data-strategy": s, "data-workload": r.workload,
      });
      dot.append(el("title", {}, `${r.workload} · ${s}: ${fmtNumber(endToEnd(r))} tok/s end to end, ${fmtDecimalBytes(r.weightBytesPerToken)} per token${r.pickedByAuto ? " (auto picks it)" : ""}`));
      svg.append(dot);
      if (r.pickedByAuto) {
        svg.append(el("circle", { cx: px(r.weightBytesPerToken), cy: py(endToEnd(r)), r: 7.5, fill: "none", stroke: colorOf(s, i), "stroke-width": 1.5, class: "auto-pick" }));
      }
    }
  });
  seriesNames.forEach((name, k) => {
    const y = top + 10 + k * 16;
    svg.append(el("line", { x1: left + 12, x2: left + 42, y1: y, y2: y, stroke: "currentColor", "stroke-width": 2, "stroke-dasharray": dashOf(name), class: "series-key" }));
    svg.append(el("text", { x: left + 48, y: y + 4 }, name));
  });
  svg.append(el("text", { x: width - right, y: height - 8, "text-anchor": "end" }, "weight bytes read per token (log)"));
  svg.append(el("text", { x: 12, y: top + 4, transform: `rotate(-90 12 ${top + 4})`, "text-anchor": "end" }, "end-to-end tok/s (log)"));
  $("crossover").replaceChildren(svg);

  const notes = cross.map((c) => `${c.from} → ${c.to} at ≈ ${fmtDecimalBytes(c.bytes)} per token (between ${c.between[0]} and ${c.between[1]})`);
  const winners = points.map((p) => `${p.workload}: ${p.winner}`);
  if (points.length) notes.push(`Fastest end to end — ${winners.join("; ")}.`);
  if (!cross.length && points.length > 1) notes.push(`No crossover here: ${points[0].winner} is fastest on every workload.`);
  for (const w of report.plannerWarnings ?? []) notes.push(`Planner warning — ${w}`);
  $("crossover-notes").replaceChildren(
    ...notes.map((n) => {
      const li = document.createElement("li");
      li.textContent = n;
      return li;
    }),
  );
}

function drawTables(report) {
  const strats = strategies(report);
  const head = (table, cells, numericFrom) => {
    const thead = table.tHead ?? table.createTHead();
    const tr = document.createElement("tr");
    cells.forEach((c, i) => {
      const th = document.createElement("th");
      th.textContent = c;
      if (i >= numericFrom) th.className = "num";
      tr.append(th);
    });
    thead.replaceChildren(tr);
  };
  const others = strats.filter((s) => s !== "unfused");
  head($("side-by-side"), ["workload", ...strats.map((s) => `${s} tok/s`), ...others.map((s) => `${s} × unfused`), "auto picks", "same ids"], 1);
  rows(
    $("side-by-side"),
    workloads(report).map((w) => {
      const of = (s) => report.results.find((r) => r.workload === w && r.strategy === s);
      const same = report.results.filter((r) => r.workload === w).every((r) => r.idsEqualAcrossStrategies);
      return [
        w,
        ...strats.map((s) => fmtNumber(of(s)?.decodeTokensPerSecond.median)),
        ...others.map((s) => (of(s)?.speedupVsUnfused === undefined ? "–" : `${of(s).speedupVsUnfused.toFixed(2)}×`)),
        report.results.find((r) => r.workload === w && r.pickedByAuto)?.strategy ?? "–",
        chip(same ? "yes" : "no", same),
      ];
    }),
    { numericFrom: 1 },
  );
  head($("results"), ["workload", "strategy", "prompt", "new", "decode tok/s", "min–max", "prefill tok/s", "TTFT ms", "dispatches/token", "submits/token", "weights/token", "× unfused"], 2);
  rows(
    $("results"),
    report.results.map((r) => [
      r.workload, r.strategy, r.promptTokens, r.newTokens,
      fmtNumber(r.decodeTokensPerSecond.median),
      `${fmtNumber(r.decodeTokensPerSecond.min)}–${fmtNumber(r.decodeTokensPerSecond.max)}`,
      fmtNumber(r.prefillTokensPerSecond.median), fmtNumber(r.timeToFirstTokenMs.median),
      r.dispatchesPerToken, fmtNumber(r.submitsPerToken, 3), fmtBytes(r.weightBytesPerToken),
      r.speedupVsUnfused === undefined ? "–" : `${r.speedupVsUnfused.toFixed(2)}×`,
    ]),
    { numericFrom: 2 },
  );
  $("notes").replaceChildren(
    ...report.notes.map((n) => {
      const li = document.createElement("li");
      li.textContent = n;
      return li;
    }),
  );
  const profile = report.profile ?? [];
  $("profile-section").hidden = profile.length === 0;
  if (profile.length) {
    head($("profile-table"), ["context", "role", "dispatches/step", "µs/step", "GB/s"], 2);
    rows(
      $("profile-table"),
      profile.flatMap((p) =>
        p.roles.map((r) => [p.context, r.role, r.dispatchesPerStep, fmtNumber(r.microsecondsPerStep), fmtNumber(r.gigabytesPerSecond)]),
      ),
      { numericFrom: 2 },
    );
  }
  $("markdown").textContent = report.markdown;
}

// ---------------------------------------------------------------- running

function show(report) {
  drawChart(report);
  drawCrossover(report);
  drawTables(report);
  $("output").hidden = false;
}

/**
 * A saved report: this page's download (`{ kind: "fuselm-bench-browser", report, … }`), a
 * `fuselm bench --out` file or a bench script's JSON (`{ device, date, commit, report }`), or a bare
 * report. Shows it without running anything.
 */
function showSaved(json, from) {
  const report = json?.report ?? json;
  if (!Array.isArray(report?.results) || report.results.some((r) => typeof r?.strategy !== "string")) {
    throw new Error(`${from} is not a fuselm bench report (no results)`);
  }
  const device = json.device ?? json.adapter ?? {};
  const adapterName = device.adapter?.device || device.device || device.description || device.architecture || "";
  const what = [adapterName, device.adapter?.backend ?? device.backend, json.date?.slice(0, 10), json.commit && `commit ${json.commit}`]
    .filter(Boolean)
    .join(" · ");
  $("source").textContent = `Showing a saved report (${from})${what ? `: ${what}` : ""}, ${report.results.length} measurements.`;
  $("source").hidden = false;
  last = json;
  show(report);
  $("download").disabled = false;
  document.body.dataset.state = "done";
  $("status").textContent = "";
}

async function openSaved(load, from) {
  clearError($("error"));
  try {
    showSaved(await load(), from);
  } catch (e) {
    $("status").textContent = "";
    document.body.dataset.state = "error";
    $("error").replaceChildren(`Could not show ${from}: ${e?.message ?? e}`);
    $("error").hidden = false;
  }
}

function openReportUrl(url) {
  return openSaved(async () => {
    const response = await fetch(new URL(url, location.href));
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    return response.json();
  }, url);
}

async function run(event) {
  event?.preventDefault();
  const { options: opts, model } = options();
  clearError($("error"));
  $("source").hidden = true;
  document.body.dataset.state = "running";
  $("run").disabled = true;
  const t0 = performance.now();
  const tick = () => {
    $("status").replaceChildren(Object.assign(document.createElement("span"), { className: "spinner" }),
      ` running${model ? ` with ${model}` : ""}… ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  };
  tick();
  const timer = setInterval(tick, 1000);
  try {
    const report = await bench(opts, model);
    const seconds = (performance.now() - t0) / 1000;
    last = {
      kind: "fuselm-bench-browser",
      date: new Date().toISOString(),
      userAgent: navigator.userAgent,
      adapter,
      options: opts,
      model: model ?? null,
      seconds,
      report,
    };
    show(report);
    $("download").disabled = false;
    document.body.dataset.state = "done";
    $("status").textContent = `done: ${report.results.length} measurements in ${seconds.toFixed(0)} s`;
  } catch (e) {
    $("status").textContent = "";
    showError($("error"), e, "The benchmark");
  } finally {
    clearInterval(timer);
    $("run").disabled = false;
  }
}

$("form").addEventListener("submit", run);
$("report-file").addEventListener("change", (e) => {
  const file = e.target.files?.[0];
  if (file) openSaved(async () => JSON.parse(await file.text()), file.name);
});
window.fuselmBench = { crossovers };
$("download").addEventListener("click", () => {
  if (last) download(`fuselm-bench-${(last.date ?? new Date().toISOString()).slice(0, 10)}.json`, last);
});

$("run").disabled = true;
await identify();
applyParams(); // the URL overrides the adapter-based defaults
$("run").disabled = false;
if (params.has("report")) openReportUrl(params.get("report"));
else if (params.has("autorun")) run();
