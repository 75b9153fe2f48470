// The example site: a plain <script type="module"> using the built npm package.
// In your own site: `import { probe } from "fuselm"` (bundler) or from the package's dist/index.js.
import { probe, FuselmError } from "../../dist/index.js";

const $ = (id) => document.getElementById(id);
const fmtBytes = (n) => (n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(2)} GiB` : `${(n / 2 ** 20).toFixed(1)} MiB`);

function rows(table, entries) {
  const body = table.tBodies[0] ?? table.createTBody();
  body.replaceChildren(
    ...entries.map((cells) => {
      const tr = document.createElement("tr");
      for (const c of cells) {
        const td = document.createElement("td");
        td.textContent = String(c);
        tr.append(td);
      }
      return tr;
    }),
  );
}

function show(report) {
  const a = report.adapter;
  rows($("identity"), [
    ["vendor", a.vendor], ["architecture", a.architecture], ["device", a.device],
    ["description", a.description], ["backend", a.backend], ["software adapter", a.isSoftware],
    ["shader-f16", report.features.shaderF16],
    ["subgroups", report.features.subgroups ? `${report.features.subgroupMinSize}–${report.features.subgroupMaxSize}` : false],
    ["timestamp-query", report.features.timestampQuery],
  ]);
  rows($("limits"), Object.keys(report.limits).map((k) => [k, report.limits[k], report.webgpuDefaults[k]]));
  const f = report.fit;
  rows($("fit"), [
    ["largest single tensor", fmtBytes(f.maxTensorBytes)],
    ["weights one dispatch can bind", fmtBytes(f.maxWeightBytesPerDispatch)],
    ["f16 kernels", f.f16Kernels], ["subgroup kernels", f.subgroupKernels],
    ["largest resident dim (f32 / f16)", `${f.maxResidentDimF32} / ${f.maxResidentDimF16}`],
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
  const bench = $("bench").checked || new URLSearchParams(location.search).has("bench");
  document.body.dataset.state = "running";
  $("status").textContent = bench ? "probing and benchmarking…" : "probing…";
  try {
    const report = await probe({ bench, benchBytes: 16 * 2 ** 20, runs: 5 });
    show(report);
    document.body.dataset.state = "done";
    $("status").textContent = `done: ${report.adapter.description || report.adapter.architecture}`;
  } catch (e) {
    document.body.dataset.state = "error";
    document.body.dataset.errorKind = e instanceof FuselmError ? e.kind : "unknown";
    $("status").textContent = e instanceof FuselmError ? `${e.kind}: ${e.message}` : String(e);
  }
}

$("probe").addEventListener("click", run);
run();
