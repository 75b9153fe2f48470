// The bench page: `bench()` on this browser's GPU — every strategy on synthetic toy models (and
// optionally a real GGUF), shown as a table, an SVG bar chart drawn here, and a JSON download.
// On software adapters (SwiftShader, lavapipe) the defaults shrink to the smallest toy sizes and one
// measured run, since those decode at a few tokens per second.
// Query parameters: ?runs=N&small=0|1&toy=0|1&model=URL&chunkTokens=N, and ?autorun starts at once.
// In your own site: `import { bench } from "fuselm"`.
import { bench, probe } from "../../dist/index.js";
import { $, chip, clearError, download, fmtBytes, fmtNumber, rows, showError } from "./ui.js";

const params = new URLSearchParams(location.search);
const SVG = "http://www.w3.org/2000/svg";
const colors = { unfused: "#9b9bb0", fused: "#5546d6" };
const palette = ["#0b8a6d", "#d97706", "#c2410c", "#2563eb"];
const colorOf = (strategy, i) => colors[strategy] ?? palette[i % palette.length];

let adapter; // AdapterIdentity from probe(), once known
let last; // what the Download button saves

function applyParams() {
  if (params.has("runs")) $("runs").value = params.get("runs");
  if (params.has("small")) $("small-toy").checked = params.get("small") !== "0";
  if (params.has("toy")) $("toy").checked = params.get("toy") !== "0";
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
      $("adapter").append(" — a CPU adapter: the defaults are a small run (smallest toy sizes, one measured run).");
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
  head($("side-by-side"), ["workload", ...strats.map((s) => `${s} tok/s`), ...others.map((s) => `${s} × unfused`), "same ids"], 1);
  rows(
    $("side-by-side"),
    workloads(report).map((w) => {
      const of = (s) => report.results.find((r) => r.workload === w && r.strategy === s);
      const same = report.results.filter((r) => r.workload === w).every((r) => r.idsEqualAcrossStrategies);
      return [
        w,
        ...strats.map((s) => fmtNumber(of(s)?.decodeTokensPerSecond.median)),
        ...others.map((s) => (of(s)?.speedupVsUnfused === undefined ? "–" : `${of(s).speedupVsUnfused.toFixed(2)}×`)),
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

async function run(event) {
  event?.preventDefault();
  const { options: opts, model } = options();
  clearError($("error"));
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
    drawChart(report);
    drawTables(report);
    $("output").hidden = false;
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
$("download").addEventListener("click", () => {
  if (last) download(`fuselm-bench-${last.date.slice(0, 10)}.json`, last);
});

$("run").disabled = true;
await identify();
applyParams(); // the URL overrides the adapter-based defaults
$("run").disabled = false;
if (params.has("autorun")) run();
