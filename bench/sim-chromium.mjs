// The simulation benchmark through the npm package in headless Chromium (WebGPU; here that is
// SwiftShader, a CPU implementation): `simBench()` from dist/ on a blank page, the grid from
// the environment (default a small one: software adapters are slow). Compare with the native
// `fuselm sim-bench` of the same grid on this machine (lavapipe) with bench/sim-tax.py.
// Usage: node bench/sim-chromium.mjs OUT.json   (env: RUNS, POPULATIONS, EPISODES, ENVS)
import { writeFileSync } from "node:fs";
import { launch } from "../tests/site/chromium.mjs";
import { openPage, startServer } from "../tests/site/page.mjs";

const [outPath] = process.argv.slice(2);
const list = (v, d) => (v ?? d).split(",").filter(Boolean);
const options = {
  envs: list(process.env.ENVS, "pendulum,acrobot").map((name) => ({ name })),
  populations: list(process.env.POPULATIONS, "1000").map(Number),
  episodeLengths: list(process.env.EPISODES, "200,500").map(Number),
  runs: Number(process.env.RUNS ?? 3),
};
const { server, base } = await startServer();
const browser = await launch();
try {
  const { page } = await openPage(browser, `${base}/tests/sdk/blank.html`);
  const { device, report } = await page.evaluate(async (options) => {
    const f = await import("/dist/index.js");
    return { device: await f.probe({}), report: await f.simBench(options) };
  }, options);
  const out = {
    kind: "sim-bench",
    path: "npm package, headless Chromium",
    date: new Date().toISOString().slice(0, 10),
    commit: process.env.FUSELM_COMMIT ?? "unknown",
    device,
    report,
  };
  writeFileSync(outPath, JSON.stringify(out, null, 2));
  console.log(report.markdown);
} finally {
  await browser.close();
  server.close();
}
