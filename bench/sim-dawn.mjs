// The simulation benchmark through the npm package on Dawn in Node (the browser path minus
// Chrome's GPU-process hop): `simBench()` from dist/, the same grid and runs as the native
// `fuselm sim-bench`, so the two JSON files compare configuration by configuration.
// Usage: node bench/sim-dawn.mjs DAWN_DIR OUT.json   (env: RUNS, POPULATIONS=1000,10000,
// EPISODES=200,500,1500, ENVS=pendulum,acrobot)
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [dawnDir, outPath] = process.argv.slice(2);
const { create, globals } = await import(pathToFileURL(join(resolve(dawnDir), "index.js")).href);
Object.assign(globalThis, globals);
globalThis.Window ??= class Window {};
globalThis.navigator ??= {};
// DAWN_ENABLE=a,b adds Dawn toggles for experiments (e.g. disable_robustness).
const enable = process.env.DAWN_ENABLE ? [`enable-dawn-features=${process.env.DAWN_ENABLE}`] : [];
Object.defineProperty(globalThis.navigator, "gpu", { value: create(enable), configurable: true });

const dist = resolve(process.env.DIST ?? "dist"); // DIST: another build of the package
const fuselm = await import(pathToFileURL(join(dist, "index.js")).href);
await fuselm.init(readFileSync(join(dist, "wasm", "fuselm_bg.wasm")));
const list = (v, d) => (v ?? d).split(",").filter(Boolean);
const options = {
  envs: list(process.env.ENVS, "pendulum,acrobot").map((name) => ({ name })),
  populations: list(process.env.POPULATIONS, "1000,10000").map(Number),
  episodeLengths: list(process.env.EPISODES, "200,500,1500").map(Number),
  runs: Number(process.env.RUNS ?? 5),
};
const device = await fuselm.probe({});
const report = await fuselm.simBench(options);
const out = {
  kind: "sim-bench",
  path: "npm package, Node + Dawn (webgpu package)",
  date: new Date().toISOString().slice(0, 10),
  commit: process.env.FUSELM_COMMIT ?? "unknown",
  device,
  report,
};
writeFileSync(outPath, JSON.stringify(out, null, 2));
console.log(report.markdown);
