// The npm package itself on a real GPU: Node + the `webgpu` package (Dawn, Chrome's WebGPU
// implementation) as `navigator.gpu`, running dist/ — the wasm + WebGPU path a browser user gets,
// minus Chrome's GPU-process hop. Every strategy in this process, warm-up then RUNS runs each.
// Usage: node bench/dawn-bench.mjs DAWN_DIR MODEL OUT.json
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [dawnDir, modelPath, outPath] = process.argv.slice(2);
const { create, globals } = await import(pathToFileURL(join(resolve(dawnDir), "index.js")).href);
Object.assign(globalThis, globals);
// wgpu's WebGPU backend looks for a global Window, then navigator.gpu.
globalThis.Window ??= class Window {};
globalThis.navigator ??= {};
Object.defineProperty(globalThis.navigator, "gpu", { value: create([]), configurable: true });

const dist = resolve("dist");
const fuselm = await import(pathToFileURL(join(dist, "index.js")).href);
await fuselm.init(readFileSync(join(dist, "wasm", "fuselm_bg.wasm")));
const report = await fuselm.probe({});
const model = await fuselm.loadModel(new Uint8Array(readFileSync(modelPath)), { nCtx: 1152 });
const runs = Number(process.env.RUNS ?? 5);
const prompts = [
  { prompt: "Once upon a time, there was a little robot who", chat: false },
  { prompt: "Write a haiku about graphics cards.", chat: true },
];
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const results = [];
for (const { prompt, chat } of prompts) {
  for (const strategy of ["unfused", "fused"]) {
    const options = { maxTokens: 128, chat, strategy };
    await model.generate(prompt, options); // warm-up
    const decode = [], prefill = [];
    let last;
    for (let i = 0; i < runs; i++) {
      last = await model.generate(prompt, options);
      decode.push(last.timings.decodeTokensPerSecond);
      prefill.push(last.timings.promptTokensPerSecond);
    }
    const row = {
      prompt, chat, strategy, promptTokens: last.promptTokens.length, newTokens: last.tokens.length,
      decodeTokensPerSecond: { median: median(decode), min: Math.min(...decode), max: Math.max(...decode) },
      prefillTokensPerSecond: { median: median(prefill), min: Math.min(...prefill), max: Math.max(...prefill) },
      generatedIds: last.tokens,
    };
    results.push(row);
    console.log(`dawn ${strategy.padEnd(8)} decode ${row.decodeTokensPerSecond.median.toFixed(1).padStart(8)} tok/s  ` +
      `prefill ${row.prefillTokensPerSecond.median.toFixed(1).padStart(8)} tok/s  ${row.newTokens} tok  ${prompt.slice(0, 30)}`);
  }
}
model.free();
writeFileSync(outPath, JSON.stringify({ kind: "bench-dawn", adapter: report.adapter, runs, results }, null, 1));
