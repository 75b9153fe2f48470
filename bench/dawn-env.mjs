// Shared by the bench scripts that run the npm package through Dawn in Node: a `navigator.gpu`
// from the `webgpu` package (DAWN_DIR: its index.js, package.json and dist/linux-x64), the
// package from DIST, and V8's sampling profiler through the inspector.
import { readFileSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

/** Installs Dawn as `navigator.gpu` (with Dawn `flags`) and returns the initialised package. */
export async function loadFuselm(dawnDir, distDir, flags = []) {
  const { create, globals } = await import(pathToFileURL(join(resolve(dawnDir), "index.js")).href);
  Object.assign(globalThis, globals);
  // wgpu's WebGPU backend looks for a global Window, then navigator.gpu.
  globalThis.Window ??= class Window {};
  globalThis.navigator ??= {};
  Object.defineProperty(globalThis.navigator, "gpu", { value: create(flags), configurable: true });
  const dist = resolve(distDir);
  const fuselm = await import(pathToFileURL(join(dist, "index.js")).href);
  await fuselm.init(readFileSync(join(dist, "wasm", "fuselm_bg.wasm")));
  return fuselm;
}

/** Starts the sampling profiler (50 µs); the returned function stops it and writes `path`. */
export async function startProfiler(path) {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 50 });
  await session.post("Profiler.start");
  return async () => {
    const { profile } = await session.post("Profiler.stop");
    writeFileSync(path, JSON.stringify(profile));
    session.disconnect();
  };
}
