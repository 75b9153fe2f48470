// `bench()` of the npm package (dist/, built by scripts/build-npm) in headless Chromium with WebGPU
// on SwiftShader: the browser path on this CPU-only machine. SwiftShader is a CPU rasterizer, so
// only relative figures (fused vs unfused) mean anything here.
// Usage: node bench/chromium-bench.mjs OUT.json [runs] [--model] [--full-toy]   (--model: also
// SmolLM2 from models/, without the ~1,000-token workload; --full-toy: the whole toy grid, d_model
// 32–256, for the strategies' crossover, instead of the smallest sizes)
import { writeFileSync } from "node:fs";
import { execSync } from "node:child_process";
import { serve } from "../scripts/serve.mjs";
import { launch } from "../tests/site/chromium.mjs";

const [out, runsArg] = process.argv.slice(2);
const withModel = process.argv.includes("--model");
const fullToy = process.argv.includes("--full-toy");
const runs = Number(runsArg ?? 3);
const server = await serve(0);
const base = `http://127.0.0.1:${server.address().port}`;
const browser = await launch();
try {
  const page = await browser.newPage();
  page.on("console", (m) => console.log("page:", m.text()));
  await page.goto(`${base}/examples/site/index.html`);
  const result = await page.evaluate(async ({ runs, withModel, fullToy }) => {
    const fuselm = await import("/dist/index.js");
    const adapter = (await fuselm.probe()).adapter;
    const options = { runs, smallToy: !fullToy, toy: true, longContext: false };
    const model = withModel ? "/models/SmolLM2-135M-Instruct.Q4_1.gguf" : undefined;
    const report = await fuselm.bench(options, model);
    return { adapter, report };
  }, { runs, withModel, fullToy });
  let commit = "unknown";
  try { commit = execSync("git rev-parse --short HEAD").toString().trim(); } catch {}
  const json = { kind: "bench-chromium", date: new Date().toISOString().slice(0, 10), commit,
    browser: browser.version(), ...result };
  writeFileSync(out, JSON.stringify(json, null, 1));
  console.log(result.report.markdown);
} finally {
  await browser.close();
  server.close();
}
