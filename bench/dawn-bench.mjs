// The npm package itself on a real GPU: Node + the `webgpu` package (Dawn, Chrome's WebGPU
// implementation) as `navigator.gpu`, running dist/ — the wasm + WebGPU path a browser user gets,
// minus Chrome's GPU-process hop. Every strategy in this process, warm-up then RUNS runs each.
// Usage: node bench/dawn-bench.mjs DAWN_DIR MODEL OUT.json
import { openAsBlob, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [dawnDir, modelPath, outPath] = process.argv.slice(2);
const { create, globals } = await import(pathToFileURL(join(resolve(dawnDir), "index.js")).href);
Object.assign(globalThis, globals);
// wgpu's WebGPU backend looks for a global Window, then navigator.gpu.
globalThis.Window ??= class Window {};
globalThis.navigator ??= {};
// Timestamps unquantised (Dawn rounds them to 100 µs by default, as Chrome does), so the
// profile below can time a decode step; it changes nothing else. DAWN_ENABLE=a,b adds Dawn
// toggles for experiments (e.g. disable_robustness); PROFILE_ONLY=1 runs only the profile.
const enable = process.env.DAWN_ENABLE ? [`enable-dawn-features=${process.env.DAWN_ENABLE}`] : [];
Object.defineProperty(globalThis.navigator, "gpu", {
  value: create(["disable-dawn-features=timestamp_quantization", ...enable]),
  configurable: true,
});
const profileOnly = process.env.PROFILE_ONLY === "1";

const dist = resolve("dist");
const fuselm = await import(pathToFileURL(join(dist, "index.js")).href);
await fuselm.init(readFileSync(join(dist, "wasm", "fuselm_bg.wasm")));
const report = await fuselm.probe({});
if (profileOnly) {
  const profiled = await fuselm.bench({ profile: true, longContext: false, runs: 1, strategies: ["fused"] }, await openAsBlob(modelPath));
  for (const p of profiled.profile) {
    const roles = p.roles.map((r) => `${r.role.split("+")[0]}=${(r.microsecondsPerStep / r.dispatchesPerStep).toFixed(2)}`).join(" ");
    const fused = profiled.results.filter((r) => r.strategy === "fused").map((r) => Math.round(r.decodeTokensPerSecond.median));
    console.log(`dawn [${enable.join(" ")}] fused tok/s ${fused}  profile (${p.timer}): step ${p.stepMicroseconds.toFixed(0)} us  ${roles}`);
  }
  process.exit(0);
}
const loadStart = performance.now();
const model = await fuselm.loadModel(await openAsBlob(modelPath), { nCtx: 1152 });
const loadSeconds = (performance.now() - loadStart) / 1000;
const runs = Number(process.env.RUNS ?? 5);
const prompts = [
  { prompt: "Once upon a time, there was a little robot who", chat: false },
  { prompt: "Write a haiku about graphics cards.", chat: true },
];
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const results = [];
for (const { prompt, chat } of prompts) {
  // STRATEGIES=fused: only those (comma-separated), e.g. for an A/B of two builds.
  for (const strategy of (process.env.STRATEGIES ?? "unfused,fused").split(",")) {
    const options = { maxTokens: 128, chat, strategy };
    await model.generate(prompt, options).result(); // warm-up
    const decode = [], prefill = [], record = [];
    let last;
    for (let i = 0; i < runs; i++) {
      last = await model.generate(prompt, options).result();
      decode.push(last.timings.decodeTokensPerSecond);
      prefill.push(last.timings.promptTokensPerSecond);
      record.push((last.timings.recordSeconds * 1e6) / Math.max(1, last.tokens.length - 1));
    }
    const row = {
      prompt, chat, strategy, promptTokens: last.promptTokens.length, newTokens: last.tokens.length,
      decodeTokensPerSecond: { median: median(decode), min: Math.min(...decode), max: Math.max(...decode) },
      prefillTokensPerSecond: { median: median(prefill), min: Math.min(...prefill), max: Math.max(...prefill) },
      // Host time recording + submitting decode commands, per generated token (µs).
      recordMicrosecondsPerToken: { median: median(record), min: Math.min(...record), max: Math.max(...record) },
      generatedIds: last.tokens,
    };
    results.push(row);
    console.log(`dawn ${strategy.padEnd(8)} decode ${row.decodeTokensPerSecond.median.toFixed(1).padStart(8)} tok/s  ` +
      `prefill ${row.prefillTokensPerSecond.median.toFixed(1).padStart(8)} tok/s  ` +
      `host record ${row.recordMicrosecondsPerToken.median.toFixed(0).padStart(5)} µs/token  ${row.newTokens} tok  ${prompt.slice(0, 30)}`);
  }
}

// Multi-turn chat through chat.completions: time to first token of each turn with the KV cache of
// the earlier turns reused (the default) and with every turn prefilled from scratch, same answers.
const turns = [
  "What is WebGPU?",
  "How is it different from WebGL?",
  "Name one thing a compute shader can do that a fragment shader cannot.",
  "Summarize our conversation in one sentence.",
];
const chat = {};
// SKIP_CHAT=1 leaves the chat turns out (for runs that only need decode figures).
for (const reuse of process.env.SKIP_CHAT === "1" ? [] : [true, false]) {
  const rows = [];
  for (let rep = 0; rep < runs; rep++) {
    const messages = [];
    for (const [i, content] of turns.entries()) {
      messages.push({ role: "user", content });
      const r = await model.chat.completions.create({ messages, max_tokens: 48, cache_prompt: reuse });
      messages.push(r.choices[0].message);
      rows[i] ??= { turn: i + 1, promptTokens: r.usage.prompt_tokens, cachedTokens: [], ttftSeconds: [], answer: r.choices[0].message.content };
      rows[i].cachedTokens.push(r.usage.prompt_tokens_details.cached_tokens);
      rows[i].ttftSeconds.push(r.usage.extra.time_to_first_token_s);
    }
  }
  chat[reuse ? "reused" : "fresh"] = rows.map((r) => ({ ...r, ttftMedianMs: median(r.ttftSeconds) * 1000 }));
}
for (const [i, r] of (chat.reused ?? []).entries()) {
  const f = chat.fresh[i];
  console.log(`chat turn ${r.turn}: ${r.promptTokens} prompt tokens, ${r.cachedTokens[0]} reused: TTFT ${r.ttftMedianMs.toFixed(2)} ms vs ${f.ttftMedianMs.toFixed(2)} ms fresh; same answer: ${r.answer === f.answer}`);
}
await model.dispose();

// The fused step's GPU time through Dawn (the package's per-role profile, timestamp queries when
// Dawn offers them), to compare with the native profile: is the Dawn path bound by recording
// (the GPU step as fast as natively) or by Tint's compiled kernels (the step itself slower)?
const profiled = await fuselm.bench({ profile: true, longContext: false, runs: 1, strategies: ["fused"] }, await openAsBlob(modelPath));
for (const p of profiled.profile) {
  const roles = p.roles.map((r) => `${r.role.split("+")[0]}=${(r.microsecondsPerStep / r.dispatchesPerStep).toFixed(2)}`).join(" ");
  console.log(`dawn profile (${p.timer}), context ${p.context}: step ${p.stepMicroseconds.toFixed(0)} us  ${roles}`);
}
for (const r of profiled.results) {
  console.log(`dawn bench ${r.workload} ${r.strategy}: decode ${r.decodeTokensPerSecond.median.toFixed(0)} tok/s, host record ${r.recordMicrosecondsPerToken.median.toFixed(0)} µs/token`);
}
writeFileSync(outPath, JSON.stringify({ kind: "bench-dawn", adapter: report.adapter, runs, loadSeconds, results, chat, profile: profiled.profile }, null, 1));
