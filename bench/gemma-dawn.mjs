// Gemma 3 270M Q4_K_M through the npm package on Dawn in Node (the browser's wasm + WebGPU path
// on the lent GPU): greedy ids against the float64 exact reference (tests/fixtures/exact/gemma3,
// each prompt up to its first margin below 0.01) and decode speed, for both strategies.
// Usage: node bench/gemma-dawn.mjs DAWN_DIR MODEL OUT.json   (dist/ built by scripts/build-npm)
// FIXTURE=path/exact_greedy.jsonl holds another model to its reference (SmolLM2:
// tests/fixtures/exact/smollm2/exact_greedy.jsonl); chat cases are given their rendered text.
import { openAsBlob, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [dawnDir, modelPath, outPath] = process.argv.slice(2);
const { create, globals } = await import(pathToFileURL(join(resolve(dawnDir), "index.js")).href);
Object.assign(globalThis, globals);
globalThis.Window ??= class Window {};
globalThis.navigator ??= {};
Object.defineProperty(globalThis.navigator, "gpu", { value: create([]), configurable: true });

const dist = resolve("dist");
const fuselm = await import(pathToFileURL(join(dist, "index.js")).href);
await fuselm.init(readFileSync(join(dist, "wasm", "fuselm_bg.wasm")));
const report = await fuselm.probe({});
const model = await fuselm.loadModel(await openAsBlob(modelPath), { nCtx: 512 });
console.log(`strategy: ${model.info.strategy} (${model.info.strategyReason ?? ""})`);
const cases = readFileSync(process.env.FIXTURE ?? "tests/fixtures/exact/gemma3/exact_greedy.jsonl", "utf8")
  .split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const results = {};
for (const strategy of ["unfused", "fused"]) {
  const exact = [];
  for (const c of cases) {
    let n = c.top2_margin.findIndex((m) => m < 0.01);
    if (n < 0) n = c.greedy_ids.length;
    const r = await model.generate(c.rendered ?? c.prompt, { maxTokens: n, strategy }).result();
    const idsOk = JSON.stringify(r.promptTokens) === JSON.stringify(c.prompt_ids);
    // A reference that ends on the end-of-turn id: the generation stops there and does not
    // return the stop id itself (it stops early only on a stop id).
    const want = c.greedy_ids.slice(0, n);
    const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
    const genOk = same(r.tokens, want) || (r.tokens.length === n - 1 && same(r.tokens, want.slice(0, -1)));
    exact.push({ prompt: c.prompt.slice(0, 40), promptIdsEqual: idsOk, greedyEqual: genOk, compared: n });
    const firstDiff = want.findIndex((id, i) => r.tokens[i] !== id);
    console.log(`${strategy} ${idsOk && genOk ? "ok  " : "FAIL"} ${n} tokens (got ${r.tokens.length}, first difference at ${firstDiff}, prompt ids ${idsOk ? "equal" : "differ"})  ${JSON.stringify(c.prompt.slice(0, 40))}`);
  }
  const decode = [], prefill = [];
  const prompt = "Once upon a time, there was a little robot who";
  await model.generate(prompt, { maxTokens: 128, strategy }).result();
  for (let i = 0; i < 5; i++) {
    const r = await model.generate(prompt, { maxTokens: 128, strategy }).result();
    decode.push(r.timings.decodeTokensPerSecond);
    prefill.push(r.timings.promptTokensPerSecond);
  }
  console.log(`dawn ${strategy} decode ${median(decode).toFixed(1)} tok/s (${Math.min(...decode).toFixed(1)}–${Math.max(...decode).toFixed(1)}), prefill ${median(prefill).toFixed(0)} tok/s`);
  results[strategy] = { exact, decodeTokensPerSecond: { median: median(decode), min: Math.min(...decode), max: Math.max(...decode) },
    prefillTokensPerSecond: { median: median(prefill) } };
}
await model.dispose();
writeFileSync(outPath, JSON.stringify({ kind: "exact-dawn", fixture: process.env.FIXTURE ?? "tests/fixtures/exact/gemma3/exact_greedy.jsonl", date: new Date().toISOString().slice(0, 10), adapter: report.adapter,
  defaultStrategy: model.info.strategy, results }, null, 1));
