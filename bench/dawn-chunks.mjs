// Fused decode through the npm package on Dawn in Node at several `chunkTokens` caps, the caps
// interleaved over ROUNDS rounds (the host's speed drifts within a lease): decode tok/s and the
// host's recording time per token, medians per cap. With a build whose chunks double up to the
// cap, a cap of 4 gives constant chunks of 4; so the sweep shows what a chunk costs the host
// and what the last chunk's unhidden GPU time costs (bench/NOTES.md, "Chunks that follow the host").
// Usage: node bench/dawn-chunks.mjs DAWN_DIR MODEL OUT.json   (dist/ is the package measured)
import { openAsBlob, writeFileSync } from "node:fs";
import { loadFuselm } from "./dawn-env.mjs";

const [dawnDir, modelPath, outPath] = process.argv.slice(2);
const fuselm = await loadFuselm(dawnDir, "dist");
const model = await fuselm.loadModel(await openAsBlob(modelPath), { nCtx: 1152 });
const caps = (process.env.CAPS ?? "4,8,16,32,128").split(",").map(Number);
const rounds = Number(process.env.ROUNDS ?? 6);
const prompt = "Once upon a time, there was a little robot who";
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const runs = Object.fromEntries(caps.map((c) => [c, { decode: [], record: [] }]));
for (const c of caps) await model.generate(prompt, { maxTokens: 128, strategy: "fused", chunkTokens: c }).result();
for (let r = 0; r < rounds; r++) {
  for (const c of caps) {
    const out = await model.generate(prompt, { maxTokens: 128, strategy: "fused", chunkTokens: c }).result();
    runs[c].decode.push(out.timings.decodeTokensPerSecond);
    runs[c].record.push((out.timings.recordSeconds * 1e6) / Math.max(1, out.tokens.length - 1));
  }
}
const rows = caps.map((c) => ({
  chunkTokens: c,
  decodeTokensPerSecond: { median: median(runs[c].decode), min: Math.min(...runs[c].decode), max: Math.max(...runs[c].decode) },
  recordMicrosecondsPerToken: { median: median(runs[c].record), min: Math.min(...runs[c].record), max: Math.max(...runs[c].record) },
  samples: runs[c],
}));
for (const row of rows) {
  console.log(`chunks cap ${String(row.chunkTokens).padStart(3)}: decode ${row.decodeTokensPerSecond.median.toFixed(0)} tok/s ` +
    `(${row.decodeTokensPerSecond.min.toFixed(0)}–${row.decodeTokensPerSecond.max.toFixed(0)}), host record ` +
    `${row.recordMicrosecondsPerToken.median.toFixed(0)} µs/token (${row.recordMicrosecondsPerToken.min.toFixed(0)}–${row.recordMicrosecondsPerToken.max.toFixed(0)})`);
}
writeFileSync(outPath, JSON.stringify({ kind: "dawn-chunks", date: new Date().toISOString(), rounds, prompt, rows }, null, 1));
model.dispose?.();
process.exit(0);
