// Where the host's time goes in one simulation generation through the npm package on Dawn in
// Node (the browser path): a V8 CPU profile (inspector, 50 µs) of repeated fused
// `Simulation.evaluate` calls, summarised like bench/dawn-cpuprof.mjs; plus the same loop timed
// without the profiler. Usage: node bench/dawn-sim-cpuprof.mjs DAWN_DIR DIST OUT.cpuprofile
// (env: ENV=pendulum, POPULATION=1000, EPISODE=200, CALLS=300)
import { loadFuselm, startProfiler } from "./dawn-env.mjs";

const [dawnDir, distDir, profilePath] = process.argv.slice(2);
const fuselm = await loadFuselm(dawnDir, distDir);
const sim = await fuselm.createSimulation({
  env: { name: process.env.ENV ?? "pendulum" },
  policy: { kind: "mlp", hidden: 16 },
  population: Number(process.env.POPULATION ?? 1000),
  episodeLength: Number(process.env.EPISODE ?? 200),
});
const n = sim.info.parameters * Number(process.env.POPULATION ?? 1000);
const params = new Float32Array(n).map((_, i) => Math.sin(i * 12.9898) * 0.5);
const calls = Number(process.env.CALLS ?? 300);
const timed = async (label) => {
  const t = [];
  let gpuMs = 0;
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    const r = await sim.evaluate(params, { seed: i, strategy: "fused" });
    t.push(performance.now() - t0);
    gpuMs += r.elapsedMs;
  }
  t.sort((a, b) => a - b);
  console.log(`${label}: evaluate median ${(t[t.length >> 1] * 1e3).toFixed(0)} µs (min ${(t[0] * 1e3).toFixed(0)}), ` +
    `elapsedMs mean ${(gpuMs / calls * 1e3).toFixed(0)} µs, ${n} parameters`);
};
await timed("warm-up");
await timed("plain");
const stopProfiler = await startProfiler(profilePath);
await timed("profiled");
await stopProfiler();
sim.free();
