// Where the host's time goes when the npm package decodes through Dawn in Node: a V8 CPU profile
// of fused generations (the inspector's sampling profiler, 50 µs, around the generations only),
// summarised by self time per function and per layer (wasm, the wasm-bindgen glue, Dawn's native calls, GC). Build the package without
// wasm-opt for this, so wasm functions keep their names.
// Usage: node bench/dawn-cpuprof.mjs DAWN_DIR MODEL DIST [OUT.cpuprofile]  (without a profile
//        path: the fused decode figures only, RUNS generations, default 5)
//        node bench/dawn-cpuprof.mjs --summarise PROFILE.cpuprofile [OUT.json]
import { openAsBlob, readFileSync, writeFileSync } from "node:fs";
import { loadFuselm, startProfiler } from "./dawn-env.mjs";

if (process.argv[2] === "--summarise") {
  const prof = JSON.parse(readFileSync(process.argv[3], "utf8"));
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const dt = prof.timeDeltas;
  for (let i = 0; i < prof.samples.length; i++) {
    const n = byId.get(prof.samples[i]);
    const f = n.callFrame;
    const key = `${f.functionName || "(anonymous)"} ${f.url ? f.url.split("/").slice(-1)[0] : ""}`;
    self.set(key, (self.get(key) ?? 0) + (dt[i] ?? 0));
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const layer = (k) => (k.includes("wasm") ? "wasm" : k.includes("fuselm.js") ? "wasm-bindgen glue" :
    k.startsWith("(garbage") ? "gc" : k.startsWith("(idle") ? "idle" : k.startsWith("(program") ? "program" :
    k.trim().endsWith(".js") || k.includes(".mjs") ? "js" : "native");
  const layers = {};
  for (const [k, v] of self) layers[layer(k)] = (layers[layer(k)] ?? 0) + v;
  const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, 60)
    .map(([k, v]) => ({ fn: k, ms: v / 1e3, share: v / total }));
  for (const [k, v] of Object.entries(layers)) console.log(`${k.padEnd(18)} ${(v / 1e3).toFixed(1).padStart(9)} ms  ${(100 * v / total).toFixed(1)}%`);
  for (const t of top.slice(0, 40)) console.log(`${t.ms.toFixed(1).padStart(9)} ms ${(100 * t.share).toFixed(1).padStart(5)}%  ${t.fn}`);
  if (process.argv[4]) writeFileSync(process.argv[4], JSON.stringify({ totalMs: total / 1e3, layers, top }, null, 1));
  process.exit(0);
}

const [dawnDir, modelPath, distDir, profilePath] = process.argv.slice(2);
const fuselm = await loadFuselm(dawnDir, distDir);
const model = await fuselm.loadModel(await openAsBlob(modelPath), { nCtx: 1152 });
const options = { maxTokens: 128, strategy: "fused" };
const prompt = "Once upon a time, there was a little robot who";
await model.generate(prompt, options).result(); // warm-up
const stopProfiler = profilePath ? await startProfiler(profilePath) : null;
for (let i = 0; i < Number(process.env.RUNS ?? 5); i++) {
  const r = await model.generate(prompt, options).result();
  const t = r.timings;
  console.log(`${distDir}: fused ${t.decodeTokensPerSecond.toFixed(1)} tok/s, host record ${(t.recordSeconds * 1e6 / (r.tokens.length - 1)).toFixed(0)} µs/token`);
}
await stopProfiler?.();
await model.dispose();
