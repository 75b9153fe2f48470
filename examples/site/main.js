// The probe page (the site's landing page): what this browser's WebGPU adapter can do.
// `probe()` reports identity, features, limits next to the WebGPU defaults and what model sizes
// fit; with ?bench (or the checkbox) also micro-benchmarks: dispatch cost, round trip, bandwidth.
// In your own site: `import { probe } from "fuselm"` (bundler) or from the package's dist/index.js.
import { probe } from "../../dist/index.js";
import { $, chip, errorKind, errorText, fmtBytes, rows } from "./ui.js";

function show(report) {
  const a = report.adapter;
  const f = report.features;
  $("verdict").replaceChildren(
    chip(a.isSoftware ? "software adapter (CPU): expect a few tokens/s" : "hardware adapter", !a.isSoftware),
    chip(`shader-f16 ${f.shaderF16 ? "✓" : "✗"}`, f.shaderF16),
    chip(f.subgroups ? `subgroups ${f.subgroupMinSize}–${f.subgroupMaxSize}` : "subgroups ✗", f.subgroups),
    chip(`timestamp-query ${f.timestampQuery ? "✓" : "✗"}`, f.timestampQuery),
  );
  rows($("identity"), [
    ["vendor", a.vendor || "–"], ["architecture", a.architecture || "–"], ["device", a.device || "–"],
    ["description", a.description || "–"], ["backend", a.backend], ["software adapter", a.isSoftware ? "yes" : "no"],
    ["shader-f16", f.shaderF16 ? "yes" : "no"],
    ["subgroups", f.subgroups ? `${f.subgroupMinSize}–${f.subgroupMaxSize}` : "no"],
    ["timestamp-query", f.timestampQuery ? "yes" : "no"],
  ]);
  rows(
    $("limits"),
    Object.keys(report.limits).map((k) => {
      const mine = report.limits[k];
      const dflt = report.webgpuDefaults[k];
      const bytes = /Size$/.test(k) && mine >= 2 ** 20;
      const above = mine !== dflt ? (k.startsWith("min") ? mine < dflt : mine > dflt) : undefined;
      return [
        k,
        bytes ? `${mine} (${fmtBytes(mine)})` : mine,
        bytes ? `${dflt} (${fmtBytes(dflt)})` : dflt,
        above === undefined ? "" : chip(above ? "better" : "worse", above),
      ];
    }),
    { numericFrom: 1 },
  );
  const fit = report.fit;
  rows($("fit"), [
    ["largest single tensor", fmtBytes(fit.maxTensorBytes)],
    ["weights one dispatch can bind", fmtBytes(fit.maxWeightBytesPerDispatch)],
    ["f16 kernels", fit.f16Kernels ? "yes" : "no"], ["subgroup kernels", fit.subgroupKernels ? "yes" : "no"],
    ["largest resident dim (f32 / f16)", `${fit.maxResidentDimF32} / ${fit.maxResidentDimF16}`],
  ]);
  const b = report.bench;
  $("bench-title").hidden = $("bench-table").hidden = !b;
  if (b) {
    const m = (x) => `${x.median.toFixed(2)} ${x.unit} (min ${x.min.toFixed(2)}, max ${x.max.toFixed(2)}, ${x.timer})`;
    rows($("bench-table"), [
      ["dependent dispatch in one pass", m(b.dependentDispatch)],
      ["submit + readback round trip", m(b.submitAndReadback)],
      ["read bandwidth, 1 workgroup", m(b.readBandwidthOneWorkgroup)],
      [`read bandwidth, ${b.manyWorkgroups} workgroups`, m(b.readBandwidthManyWorkgroups)],
    ]);
  }
  $("summary").hidden = false;
  $("report").textContent = JSON.stringify(report, null, 2);
}

async function run() {
  const bench = $("bench").checked;
  document.body.dataset.state = "running";
  delete document.body.dataset.errorKind;
  $("probe").disabled = true;
  $("status").textContent = bench ? "probing and benchmarking…" : "probing…";
  try {
    const report = await probe({ bench, benchBytes: 16 * 2 ** 20, runs: 5 });
    show(report);
    document.body.dataset.state = "done";
    $("status").textContent = `done: ${report.adapter.description || report.adapter.architecture}`;
  } catch (e) {
    document.body.dataset.state = "error";
    document.body.dataset.errorKind = errorKind(e);
    $("status").textContent = errorText(e);
    $("verdict").replaceChildren(chip("no usable WebGPU adapter: fuselm cannot run in this browser", false));
  } finally {
    $("probe").disabled = false;
  }
}

// ?bench ticks the box for the first run.
if (new URLSearchParams(location.search).has("bench")) $("bench").checked = true;
$("probe").addEventListener("click", run);
run();
