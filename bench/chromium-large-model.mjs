// A model at deployment size in headless Chromium (issue 38): the npm package loads a GGUF
// streamed from the page's server (fit check, progress, GPU memory), generates a few tokens with
// the default strategy and with unfused, and reports the tab's memory: the JS heap, the wasm
// memory and the live GPU buffers (counted by wrapping createBuffer/destroy). Writes one JSON.
// On this machine Chromium's WebGPU is SwiftShader (CPU): the figures say what fits and what the
// tab ends with, not speed.
//
//   node bench/chromium-large-model.mjs --model target/large/phi3-mini-Q4_K_M.gguf --out FILE
//       [--tokens 2] [--n-ctx 64]
import { createHash } from "node:crypto";
import { createReadStream, statSync, writeFileSync } from "node:fs";
import { relative, resolve, basename } from "node:path";
import { parseArgs } from "node:util";
import { launch } from "../tests/site/chromium.mjs";
import { liveBuffers, trackGpuBuffers } from "../tests/site/gpu-buffers.mjs";
import { openPage, root, startServer } from "../tests/site/page.mjs";

const { values: opt } = parseArgs({
  options: { model: { type: "string" }, out: { type: "string" }, tokens: { type: "string" }, "n-ctx": { type: "string" } },
});
if (!opt.model || !opt.out) {
  console.error("usage: node bench/chromium-large-model.mjs --model GGUF --out FILE [--tokens N] [--n-ctx N]");
  process.exit(2);
}
const sha256 = (path) =>
  new Promise((ok, fail) => {
    const h = createHash("sha256");
    createReadStream(path).on("data", (d) => h.update(d)).on("end", () => ok(h.digest("hex"))).on("error", fail);
  });

const modelPath = resolve(opt.model);
const { server, base } = await startServer();
const browser = await launch({ args: ["--js-flags=--expose-gc"] });
try {
  const { page } = await openPage(browser, `${base}/tests/sdk/blank.html`, { init: trackGpuBuffers });
  page.on("console", (m) => console.log("page:", m.text()));
  const started = Date.now();
  const result = await page.evaluate(
    async ({ url, tokens, nCtx }) => {
      const f = await import("/dist/index.js");
      const wasm = await (await import("/dist/wasm/fuselm.js")).default();
      const memory = () => {
        for (let i = 0; i < 3; i++) window.gc();
        const gpu = window.__gpuBuffers();
        return { jsHeapBytes: performance.memory.usedJSHeapSize, wasmBytes: wasm.memory.buffer.byteLength, gpu };
      };
      const device = await f.probe({});
      const before = memory();
      const progress = [];
      let t = performance.now();
      const model = await f.loadModel(url, {
        nCtx,
        cache: "none",
        onProgress: (p) => {
          if (progress.length === 0 || p.phase !== progress.at(-1).phase || p.loaded === p.total) {
            progress.push({ phase: p.phase, loaded: p.loaded, total: p.total, ms: Math.round(performance.now() - t) });
          }
        },
      });
      const loadSeconds = (performance.now() - t) / 1000;
      const afterLoad = memory();
      const runs = [];
      for (const strategy of [undefined, "unfused"]) {
        t = performance.now();
        const r = await model.generate("The capital of France is", { maxTokens: tokens, strategy }).result();
        runs.push({
          strategy: strategy ?? `default (${model.info.strategy})`,
          tokens: r.tokens,
          text: r.text,
          seconds: (performance.now() - t) / 1000,
          prefillSeconds: r.timings.prefillSeconds,
        });
      }
      const afterGenerate = memory();
      const info = model.info;
      await model.dispose();
      const afterDispose = memory();
      return {
        adapter: device.adapter,
        limits: device.limits,
        fit: device.fit,
        loadSeconds,
        progress,
        info: { strategy: info.strategy, strategyReason: info.strategyReason, memory: info.memory, kernelsCompiled: info.kernelsCompiled, architecture: info.architecture, parameters: info.parameters },
        runs,
        memory: { before, afterLoad, afterGenerate, afterDispose },
      };
    },
    { url: `/${relative(root, modelPath)}`, tokens: Number(opt.tokens ?? 2), nCtx: Number(opt["n-ctx"] ?? 64) },
  );
  result.liveBuffersAtEnd = await liveBuffers(page);
  const out = {
    kind: "chromium-large-model",
    date: new Date().toISOString().slice(0, 10),
    commit: process.env.FUSELM_COMMIT ?? "unknown",
    browser: `headless Chromium ${browser.version()}`,
    model: { file: basename(modelPath), bytes: statSync(modelPath).size, sha256: await sha256(modelPath) },
    wallSeconds: (Date.now() - started) / 1000,
    ...result,
  };
  writeFileSync(opt.out, JSON.stringify(out, null, 1));
  console.log(JSON.stringify({ load: out.loadSeconds, runs: out.runs.map((r) => [r.strategy, r.tokens, r.seconds]), memory: out.memory }, null, 1));
} finally {
  await browser.close();
  server.close();
}
