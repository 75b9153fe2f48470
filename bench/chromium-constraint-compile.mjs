// Compile times of the schema corpus in headless Chromium (issue 33): the npm package loads a
// model, then compiles each schema of tests/fixtures/schemas over its vocabulary in wasm with
// `model.prepareResponseFormat` (compile seconds, automaton states, masks, GPU table bytes), and
// once more to show the model's cache. Compiling runs on the CPU, so SwiftShader here does not
// change it; the first generation with a format waits for this compile (unless prepared) and
// then for its first token. Native figures: `fuselm constraint-bench` (bench/README.md).
//
//   node bench/chromium-constraint-compile.mjs --model models/SmolLM2-135M-Instruct.Q4_1.gguf --out FILE
import { createHash } from "node:crypto";
import { createReadStream, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import { basename, join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { launch } from "../tests/site/chromium.mjs";
import { openPage, root, startServer } from "../tests/site/page.mjs";

const { values: opt } = parseArgs({
  options: { model: { type: "string" }, out: { type: "string" } },
});
if (!opt.model || !opt.out) {
  console.error("usage: node bench/chromium-constraint-compile.mjs --model GGUF --out FILE");
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
    async ({ url, schemas }) => {
      const f = await import("/dist/index.js");
      const device = await f.probe({});
      const model = await f.loadModel(url, { nCtx: 256, cache: "none" });
      const rows = [];
      for (const { name, schema } of schemas) {
        const format = { type: "json_schema", schema };
        const t = performance.now();
        try {
          const first = await model.prepareResponseFormat(format);
          const ms = performance.now() - t;
          const again = await model.prepareResponseFormat(format);
          rows.push({ schema: name, ms, compileMs: first.compileSeconds * 1000, states: first.states, masks: first.masks, tableBytes: first.tableBytes, cachedMs: again.compileSeconds * 1000, cached: again.cached });
          console.log(`${name}: compile ${(first.compileSeconds * 1000).toFixed(0)} ms, ${first.states} states, ${first.masks} masks, table ${first.tableBytes} B; again ${(again.compileSeconds * 1000).toFixed(2)} ms`);
        } catch (e) {
          rows.push({ schema: name, ms: performance.now() - t, error: `${e.kind}: ${e.message}` });
          console.log(`${name}: ${e.kind}: ${e.message}`);
        }
      }
      const info = { strategy: model.info.strategy, architecture: model.info.architecture };
      await model.dispose();
      return { adapter: device.adapter, info, rows };
    },
    { url: `/${relative(root, modelPath)}`, schemas },
  );
  const ok = result.rows.filter((r) => !r.error);
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
    host: `${os.cpus().length} × ${os.cpus()[0]?.model ?? "CPU"}`,
    model: { file: basename(modelPath), bytes: statSync(modelPath).size, sha256: await sha256(modelPath) },
    wallSeconds: (Date.now() - started) / 1000,
    compiled: ok.length,
    failed: result.rows.filter((r) => r.error).map((r) => ({ schema: r.schema, error: r.error, ms: r.ms })),
    compileMs: stats(ok.map((r) => r.compileMs)),
    cachedMs: stats(ok.map((r) => r.cachedMs)),
    tableBytes: stats(ok.map((r) => r.tableBytes)),
    ...result,
  };
  writeFileSync(opt.out, JSON.stringify(out, null, 1));
  console.log(JSON.stringify({ compiled: out.compiled, failed: out.failed.length, compileMs: out.compileMs, cachedMs: out.cachedMs, tableBytes: out.tableBytes }, null, 1));
} finally {
  await browser.close();
  server.close();
}
