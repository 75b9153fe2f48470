// Compile times of the schema corpus in headless Chromium (issue 33): the npm package loads a
// model, then for each schema of tests/fixtures/schemas generates one token under it twice. The
// first run compiles the schema over the model's vocabulary in wasm
// (`timings.constraintSeconds`) and is a schema's first-use latency (compile + prefill + the
// first token: the wall time of the call); the second finds it in the model's cache. Writes one
// JSON. Compiling runs on the CPU, so SwiftShader here changes the first-use latency, not the
// compile time; the native figures come from `fuselm constraint-bench` (bench/README.md).
//
//   node bench/chromium-constraint-compile.mjs --model models/SmolLM2-135M-Instruct.Q4_1.gguf --out FILE
import { createHash } from "node:crypto";
import { createReadStream, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { launch } from "../tests/site/chromium.mjs";
import { openPage, root, startServer } from "../tests/site/page.mjs";

const { values: opt } = parseArgs({
  options: { model: { type: "string" }, out: { type: "string" }, prompt: { type: "string" } },
});
if (!opt.model || !opt.out) {
  console.error("usage: node bench/chromium-constraint-compile.mjs --model GGUF --out FILE [--prompt TEXT]");
  process.exit(2);
}
const sha256 = (path) =>
  new Promise((ok, fail) => {
    const h = createHash("sha256");
    createReadStream(path).on("data", (d) => h.update(d)).on("end", () => ok(h.digest("hex"))).on("error", fail);
  });
const dir = join(root, "tests/fixtures/schemas");
const schemas = readdirSync(dir)
  .filter((f) => f.endsWith(".json"))
  .sort()
  .map((f) => ({ name: f.replace(/\.json$/, ""), schema: JSON.parse(readFileSync(join(dir, f), "utf8")) }));

const modelPath = resolve(opt.model);
const { server, base } = await startServer();
const browser = await launch();
try {
  const { page } = await openPage(browser, `${base}/tests/sdk/blank.html`);
  page.on("console", (m) => console.log("page:", m.text()));
  const started = Date.now();
  const result = await page.evaluate(
    async ({ url, schemas, prompt }) => {
      const f = await import("/dist/index.js");
      const device = await f.probe({});
      const model = await f.loadModel(url, { nCtx: 256, cache: "none" });
      const rows = [];
      for (const { name, schema } of schemas) {
        const once = async () => {
          const t = performance.now();
          try {
            const r = await model.generate(prompt, { maxTokens: 1, responseFormat: { type: "json_schema", schema } }).result();
            return { ms: performance.now() - t, compileMs: r.timings.constraintSeconds * 1000, prefillMs: r.timings.prefillSeconds * 1000 };
          } catch (e) {
            return { ms: performance.now() - t, error: `${e.kind}: ${e.message}` };
          }
        };
        const first = await once();
        const again = first.error ? null : await once();
        rows.push({ schema: name, firstUse: first, cached: again });
        console.log(`${name}: ${first.error ?? `compile ${first.compileMs.toFixed(0)} ms, first use ${first.ms.toFixed(0)} ms, cached compile ${again.compileMs.toFixed(1)} ms`}`);
      }
      const info = { strategy: model.info.strategy, architecture: model.info.architecture };
      await model.dispose();
      return { adapter: device.adapter, info, rows };
    },
    { url: `/${relative(root, modelPath)}`, schemas, prompt: opt.prompt ?? "{" },
  );
  const ok = result.rows.filter((r) => !r.firstUse.error);
  const stats = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    const q = (p) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)];
    return { n: s.length, median: q(0.5), p95: q(0.95), max: s.at(-1) };
  };
  const out = {
    kind: "chromium-constraint-compile",
    date: new Date().toISOString().slice(0, 10),
    commit: process.env.FUSELM_COMMIT ?? "unknown",
    browser: `headless Chromium ${browser.version()}`,
    model: { file: basename(modelPath), bytes: statSync(modelPath).size, sha256: await sha256(modelPath) },
    wallSeconds: (Date.now() - started) / 1000,
    compiled: ok.length,
    failed: result.rows.filter((r) => r.firstUse.error).map((r) => ({ schema: r.schema, error: r.firstUse.error, ms: r.firstUse.ms })),
    compileMs: stats(ok.map((r) => r.firstUse.compileMs)),
    firstUseMs: stats(ok.map((r) => r.firstUse.ms)),
    cachedCompileMs: stats(ok.map((r) => r.cached.compileMs)),
    ...result,
  };
  writeFileSync(opt.out, JSON.stringify(out, null, 1));
  console.log(JSON.stringify({ compiled: out.compiled, failed: out.failed.length, compileMs: out.compileMs, firstUseMs: out.firstUseMs, cachedCompileMs: out.cachedCompileMs }, null, 1));
} finally {
  await browser.close();
  server.close();
}
