// The toy grid (issue 9's crossover) through the npm package on Dawn in Node — the browser's
// WebGPU implementation minus Chrome's GPU-process hop: unfused, fused and megakernel side by
// side, end-to-end tok/s, plus the planner's warnings. No model needed.
// Usage: node bench/megakernel-dawn.mjs DAWN_PACKAGE_DIR OUT.json   (bench/megakernel-dawn-gpu.sh)
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [dawnDir, outPath] = process.argv.slice(2);
const { create, globals } = await import(pathToFileURL(join(resolve(dawnDir), "index.js")).href);
Object.assign(globalThis, globals);
globalThis.Window ??= class Window {};
globalThis.navigator ??= {};
Object.defineProperty(globalThis.navigator, "gpu", { value: create([]), configurable: true });

const dist = resolve("dist");
const fuselm = await import(pathToFileURL(join(dist, "index.js")).href);
await fuselm.init(readFileSync(join(dist, "wasm", "fuselm_bg.wasm")));
const adapter = await fuselm.probe({});
const runs = Number(process.env.RUNS ?? 5);
const report = await fuselm.bench({ toy: true, runs });
console.log(report.markdown);
writeFileSync(
  outPath,
  JSON.stringify(
    {
      kind: "fuselm-bench-dawn-toy",
      commit: process.env.FUSELM_COMMIT ?? "unknown",
      date: new Date().toISOString().slice(0, 10),
      device: adapter.adapter,
      runs,
      report,
    },
    null,
    1,
  ),
);
