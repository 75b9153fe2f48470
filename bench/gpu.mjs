// The npm package's side of bench/gpu: runs the package (dist/) through Dawn in Node (the `webgpu`
// package as `navigator.gpu`: the browser's wasm + WebGPU path minus Chrome's GPU process) or in
// headless Chromium on this machine, and writes one JSON. bench/gpu calls it (`bench/gpu dawn`,
// `bench/gpu chromium`); run it directly only to debug it.
//
//   node bench/gpu.mjs MODE (--dawn WEBGPU_DIR | --chromium) [--dist DIR] [--model GGUF] --out FILE [options]
//
// MODE:
//   bench   `bench()` of the package, the same report as `fuselm bench`; options as that command's:
//           --runs N --toy --small-toy --profile --no-long --chunk-tokens N --grid --strategies a,b
//   decode  `generate()` of 128 tokens on two prompts per strategy (--strategies, default
//           unfused,fused; --runs N; --max-tokens N), host recording µs per token, then the time
//           to first token of a 4-turn chat with and without KV reuse (--no-chat leaves it out),
//           abort during a long prompt per strategy (ms from abort() to the rejection, beside the
//           whole prefill), and the model loaded again on the same device (seconds, kernels
//           compiled: the first load's and the second's)
//   exact   greedy ids against a float64 exact reference (--fixture JSONL), each prompt up to its
//           first top-2 margin below 0.01, per strategy; exits 1 on any difference
//   sim     `simBench()`: --runs N --populations a,b --episodes a,b --envs a,b --policy linear|mlp:H|rnn:H
// Dawn only: --dawn-flags "enable=a,b disable=c" (Dawn toggles; timestamp_quantization is always
// disabled so profiles are not rounded to 100 µs), --cpuprof FILE (a V8 CPU profile of the
// measured part, for Chrome DevTools). Chromium: bench and sim; the model must lie inside the repo;
// --gpu-adapter: the real GPU through Vulkan (the GPU machine) instead of SwiftShader.
import { openAsBlob, readFileSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const argv = process.argv.slice(2);
const mode = argv.shift();
const opt = {};
for (let i = 0; i < argv.length; i++) {
  const key = argv[i].replace(/^--/, "");
  const next = argv[i + 1];
  if (next === undefined || next.startsWith("--")) opt[key] = true;
  else opt[key] = argv[++i];
}
const list = (v, d) => String(v ?? d).split(",").filter(Boolean);
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const spread = (v) => ({ median: median(v), min: Math.min(...v), max: Math.max(...v) });
const runs = Number(opt.runs ?? 5);
if (!["bench", "decode", "exact", "sim"].includes(mode) || !opt.out || !(opt.dawn || opt.chromium)) {
  console.error("usage: node bench/gpu.mjs bench|decode|exact|sim (--dawn DIR | --chromium) [--dist DIR] [--model GGUF] --out FILE [options]");
  process.exit(2);
}

// What runs inside the package: arrow functions, so that Chromium can take their source.
const payloads = {
  bench: async (f, { options, model }) => ({ device: await f.probe({}), report: await f.bench(options, model) }),
  sim: async (f, { options }) => ({ device: await f.probe({}), report: await f.simBench(options) }),
};
const benchOptions = () => ({
  runs,
  toy: opt.toy ? true : undefined,
  smallToy: opt["small-toy"] ? true : undefined,
  profile: opt.profile ? true : undefined,
  longContext: opt["no-long"] ? false : undefined,
  chunkTokens: opt["chunk-tokens"] ? Number(opt["chunk-tokens"]) : undefined,
  megakernelGrid: opt.grid ? true : undefined,
  strategies: opt.strategies ? list(opt.strategies) : undefined,
});
const simOptions = () => {
  const p = String(opt.policy ?? "mlp:16");
  const [kind, hidden] = p.split(":");
  const policy = kind === "linear" ? { kind: "linear" } : { kind: kind === "rnn" ? "recurrent" : kind, hidden: Number(hidden) };
  return {
    envs: list(opt.envs, "pendulum,acrobot").map((name) => ({ name })),
    populations: list(opt.populations, "1000,10000").map(Number),
    episodeLengths: list(opt.episodes, "200,500,1500").map(Number),
    runs,
    policy,
  };
};

let result;
if (opt.chromium) {
  if (!payloads[mode]) throw new Error(`--chromium runs bench and sim only, not ${mode}`);
  const { launch } = await import("../tests/site/chromium.mjs");
  const { startServer, openPage, root } = await import("../tests/site/page.mjs");
  const { server, base } = await startServer();
  const browser = await launch({ adapter: opt["gpu-adapter"] ? "gpu" : "swiftshader" });
  try {
    const { page } = await openPage(browser, `${base}/tests/sdk/blank.html`);
    page.on("console", (m) => console.log("page:", m.text()));
    const model = opt.model ? `/${relative(root, resolve(opt.model))}` : undefined;
    const options = mode === "sim" ? simOptions() : benchOptions();
    result = await page.evaluate(
      async ({ src, args }) => (0, eval)(`(${src})`)(await import("/dist/index.js"), args),
      { src: payloads[mode].toString(), args: { options, model } },
    );
    result.path = `npm package, headless Chromium ${browser.version()}`;
  } finally {
    await browser.close();
    server.close();
  }
} else {
  const { create, globals } = await import(pathToFileURL(join(resolve(opt.dawn), "index.js")).href);
  Object.assign(globalThis, globals);
  // wgpu's WebGPU backend looks for a global Window, then navigator.gpu (Node 20 has neither).
  globalThis.Window ??= class Window {};
  globalThis.navigator ??= {};
  const flags = ["disable-dawn-features=timestamp_quantization"];
  for (const f of String(opt["dawn-flags"] ?? "").split(/\s+/).filter(Boolean)) {
    const [k, v] = f.split("=");
    flags.push(`${k}-dawn-features=${v}`);
  }
  Object.defineProperty(globalThis.navigator, "gpu", { value: create(flags), configurable: true });
  const dist = resolve(opt.dist ?? "dist");
  const fuselm = await import(pathToFileURL(join(dist, "index.js")).href);
  await fuselm.init(readFileSync(join(dist, "wasm", "fuselm_bg.wasm")));
  let stopProfile = async () => {};
  if (opt.cpuprof) {
    const { Session } = await import("node:inspector/promises");
    const session = new Session();
    session.connect();
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 50 });
    await session.post("Profiler.start");
    stopProfile = async () => {
      const { profile } = await session.post("Profiler.stop");
      writeFileSync(opt.cpuprof, JSON.stringify(profile));
      session.disconnect();
    };
  }
  const model = opt.model ? await openAsBlob(opt.model) : undefined;
  if (mode === "bench") result = await payloads.bench(fuselm, { options: benchOptions(), model });
  else if (mode === "sim") result = await payloads.sim(fuselm, { options: simOptions() });
  else if (mode === "decode") result = await decode(fuselm, model);
  else result = await exact(fuselm, model);
  await stopProfile();
  result.path = "npm package, Node + Dawn (the webgpu package)";
  result.dawnFlags = flags;
}

const out = {
  kind: `package-${mode}`,
  date: new Date().toISOString().slice(0, 10),
  commit: process.env.FUSELM_COMMIT ?? "unknown",
  ...result,
};
writeFileSync(opt.out, JSON.stringify(out, null, 1));
if (result.report?.markdown) console.log(result.report.markdown);
for (const p of result.report?.profile ?? []) {
  const roles = p.roles.map((r) => `${r.role.split("+")[0]}=${(r.microsecondsPerStep / r.dispatchesPerStep).toFixed(2)}`).join(" ");
  console.log(`profile (${p.timer}), context ${p.context}: step ${p.stepMicroseconds.toFixed(0)} us  ${roles}`);
}
if (result.failed) process.exit(1);

async function decode(fuselm, model) {
  const device = await fuselm.probe({});
  let t0 = performance.now();
  const loaded = await fuselm.loadModel(model, { nCtx: 1152 });
  const loads = [{ seconds: (performance.now() - t0) / 1000, kernelsCompiled: loaded.info.kernelsCompiled }];
  const maxTokens = Number(opt["max-tokens"] ?? 128);
  const prompts = [
    { prompt: "Once upon a time, there was a little robot who", chat: false },
    { prompt: "Write a haiku about graphics cards.", chat: true },
  ];
  const results = [];
  for (const { prompt, chat } of prompts) {
    for (const strategy of list(opt.strategies, "unfused,fused")) {
      const options = { maxTokens, chat, strategy };
      await loaded.generate(prompt, options).result(); // warm-up
      const decode = [], prefill = [], record = [];
      let last;
      for (let i = 0; i < runs; i++) {
        last = await loaded.generate(prompt, options).result();
        decode.push(last.timings.decodeTokensPerSecond);
        prefill.push(last.timings.promptTokensPerSecond);
        record.push((last.timings.recordSeconds * 1e6) / Math.max(1, last.tokens.length - 1));
      }
      const row = {
        prompt, chat, strategy, promptTokens: last.promptTokens.length, newTokens: last.tokens.length,
        decodeTokensPerSecond: spread(decode),
        prefillTokensPerSecond: spread(prefill),
        // Host time recording + submitting decode commands, per generated token (µs).
        recordMicrosecondsPerToken: spread(record),
        generatedIds: last.tokens,
      };
      results.push(row);
      console.log(`${strategy.padEnd(8)} decode ${row.decodeTokensPerSecond.median.toFixed(1).padStart(8)} tok/s  ` +
        `prefill ${row.prefillTokensPerSecond.median.toFixed(1).padStart(8)} tok/s  host record ` +
        `${row.recordMicrosecondsPerToken.median.toFixed(0).padStart(5)} µs/token  ${row.newTokens} tok  ${prompt.slice(0, 30)}`);
    }
  }
  // Time to first token of each turn of a chat, KV cache of the earlier turns reused (the
  // default) and every turn prefilled from scratch; the answers must be the same.
  const turns = [
    "What is WebGPU?",
    "How is it different from WebGL?",
    "Name one thing a compute shader can do that a fragment shader cannot.",
    "Summarize our conversation in one sentence.",
  ];
  const chat = {};
  for (const reuse of opt["no-chat"] ? [] : [true, false]) {
    const rows = [];
    for (let rep = 0; rep < runs; rep++) {
      const messages = [];
      for (const [i, content] of turns.entries()) {
        messages.push({ role: "user", content });
        const r = await loaded.chat.completions.create({ messages, max_tokens: 48, cache_prompt: reuse });
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
    console.log(`chat turn ${r.turn}: ${r.promptTokens} prompt tokens, ${r.cachedTokens[0]} reused: TTFT ` +
      `${r.ttftMedianMs.toFixed(2)} ms vs ${f.ttftMedianMs.toFixed(2)} ms fresh; same answer: ${r.answer === f.answer}`);
  }
  // Abort during a prompt of up to ~1,000 tokens (within nCtx), a third of the way into its prefill.
  const sentence = "The quick brown fox jumps over the lazy dog. ";
  const long = sentence.repeat(Math.max(1, Math.floor(1000 / (await loaded.tokenize(sentence)).length)));
  const aborts = [];
  for (const strategy of list(opt.strategies, "unfused,fused")) {
    const whole = [], after = [];
    let promptTokens = 0;
    for (let i = 0; i < runs; i++) {
      t0 = performance.now();
      const r = await loaded.generate(long, { maxTokens: 1, strategy }).result();
      whole.push(performance.now() - t0);
      const ac = new AbortController();
      const during = loaded.generate(long, { maxTokens: 1, strategy, signal: ac.signal });
      await new Promise((done) => setTimeout(done, whole.at(-1) / 3));
      t0 = performance.now();
      ac.abort();
      const kind = await during.result().then(() => "resolved", (e) => e.kind);
      after.push(performance.now() - t0);
      if (kind !== "aborted") after[after.length - 1] = NaN;
      promptTokens = r.promptTokens.length;
    }
    const row = { strategy, promptTokens, wholePromptMs: spread(whole), abortMs: spread(after) };
    aborts.push(row);
    console.log(`${strategy.padEnd(8)} abort during a ${row.promptTokens}-token prompt: ${row.abortMs.median.toFixed(1)} ms ` +
      `(${row.abortMs.min.toFixed(1)}-${row.abortMs.max.toFixed(1)}) after abort(), whole prompt + 1 token ${row.wholePromptMs.median.toFixed(1)} ms`);
  }
  const info = loaded.info;
  await loaded.dispose();
  t0 = performance.now();
  const again = await fuselm.loadModel(model, { nCtx: 1152 });
  loads.push({ seconds: (performance.now() - t0) / 1000, kernelsCompiled: again.info.kernelsCompiled });
  await again.dispose();
  console.log(`load: first ${loads[0].seconds.toFixed(2)} s (${loads[0].kernelsCompiled} kernels compiled), ` +
    `again on the same device ${loads[1].seconds.toFixed(2)} s (${loads[1].kernelsCompiled})`);
  return { device, runs, defaultStrategy: info.strategy, results, chat, aborts, loads };
}

async function exact(fuselm, model) {
  const device = await fuselm.probe({});
  const loaded = await fuselm.loadModel(model, { nCtx: 512 });
  const cases = readFileSync(opt.fixture, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const results = {};
  let failed = false;
  for (const strategy of list(opt.strategies, "unfused,fused")) {
    results[strategy] = [];
    for (const c of cases) {
      let n = c.top2_margin.findIndex((m) => m < 0.01);
      if (n < 0) n = c.greedy_ids.length;
      // Chat cases carry their rendered text.
      const r = await loaded.generate(c.rendered ?? c.prompt, { maxTokens: n, strategy }).result();
      const idsOk = same(r.promptTokens, c.prompt_ids);
      // A reference that ends on the end-of-turn id: the generation stops there without it.
      const want = c.greedy_ids.slice(0, n);
      const genOk = same(r.tokens, want) || (r.tokens.length === n - 1 && same(r.tokens, want.slice(0, -1)));
      failed ||= !(idsOk && genOk);
      const firstDiff = want.findIndex((id, i) => r.tokens[i] !== id);
      results[strategy].push({ prompt: c.prompt.slice(0, 40), promptIdsEqual: idsOk, greedyEqual: genOk, compared: n, firstDifference: firstDiff });
      console.log(`${strategy} ${idsOk && genOk ? "ok  " : "FAIL"} ${n} tokens (got ${r.tokens.length}, first difference at ` +
        `${firstDiff}, prompt ids ${idsOk ? "equal" : "differ"})  ${JSON.stringify(c.prompt.slice(0, 40))}`);
    }
  }
  console.log(`exact reference through the package: ${failed ? "FAILED" : "passed"} (${opt.fixture})`);
  await loaded.dispose();
  return { device, fixture: opt.fixture, results, failed };
}
