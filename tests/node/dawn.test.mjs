// The npm package in Node: without WebGPU it rejects with the typed error; with the `webgpu`
// package (Dawn, Chrome's WebGPU implementation) as `navigator.gpu` it loads a model streamed
// from disk, generates, chats and disposes — where Dawn finds an adapter. Mesa 22's lavapipe
// (this repository's CPU test machine) lacks Vulkan 1.1 features Dawn requires, so there the GPU
// test is skipped with that reason; `bench/gpu dawn node-test` runs this file on the GPU machine
// (FUSELM_DAWN_DIR points at a copy of the `webgpu` package there).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, openAsBlob, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fuselm = await import(pathToFileURL(join(root, "dist/index.js")).href);
await fuselm.init(readFileSync(join(root, "dist/wasm/fuselm_bg.wasm")));

test("without WebGPU, Node gets the typed webgpu-unavailable error", async () => {
  assert.equal(globalThis.navigator?.gpu, undefined);
  const e = await fuselm.probe().then(() => null, (e) => e);
  assert.ok(e instanceof fuselm.FuselmError, String(e));
  assert.equal(e.kind, "webgpu-unavailable");
});

const dawn = process.env.FUSELM_DAWN_DIR
  ? await import(pathToFileURL(join(process.env.FUSELM_DAWN_DIR, "index.js")).href)
  : await import("webgpu");
Object.assign(globalThis, dawn.globals);
// wgpu's WebGPU backend looks for a global Window, then navigator.gpu.
globalThis.Window ??= class Window {};
globalThis.navigator ??= {};
Object.defineProperty(globalThis.navigator, "gpu", { value: dawn.create([]), configurable: true });
const adapter = await navigator.gpu.requestAdapter();
const skip = adapter
  ? false
  : "Dawn finds no adapter on this machine (on Mesa 22's lavapipe it requires Vulkan shaderUniform*ArrayDynamicIndexing); `bench/gpu dawn node-test` runs this test on the GPU machine";

function syntheticModel() {
  const path = join(root, "target/site-test/synthetic-q8.gguf");
  if (!existsSync(path)) {
    const cli = ["target/debug/fuselm", "target/release/fuselm"].map((p) => join(root, p)).find(existsSync);
    assert.ok(cli, "no fuselm CLI to write the synthetic model with");
    execFileSync(cli, ["synthetic-model", path, "--matrix-type", "Q8_0"], { stdio: "inherit" });
  }
  return path;
}

test("through Dawn: probe, load streamed from disk, generate, chat, dispose", { skip }, async () => {
  const report = await fuselm.probe();
  assert.equal(report.adapter.backend, "webgpu");
  const phases = new Set();
  const model = await fuselm.loadModel(await openAsBlob(process.env.FUSELM_NODE_MODEL ?? syntheticModel()), {
    nCtx: 256,
    onProgress: (p) => phases.add(p.phase),
  });
  assert.deepEqual([...phases], ["download", "parse", "upload", "compile"]);
  const generation = model.generate("Hello", { maxTokens: 16, chunkTokens: 4 });
  const chunks = [];
  for await (const c of generation) chunks.push(c);
  const result = await generation.result();
  assert.deepEqual(chunks.flatMap((c) => c.tokenIds), result.tokens);
  const unfused = await model.generate("Hello", { maxTokens: 16, strategy: "unfused" }).result();
  assert.deepEqual(unfused.tokens, result.tokens, "both strategies give the same ids");
  const chat = await model.chat.completions.create({ messages: [{ role: "user", content: "Hi" }], max_tokens: 8 });
  assert.equal(chat.object, "chat.completion");
  console.log(`dawn: ${report.adapter.description}: ${result.tokens.length} tokens, decode ${result.timings.decodeTokensPerSecond.toFixed(1)} tok/s; "${result.text}"`);
  await model.dispose();
  await assert.rejects(model.generate("Hi").result(), (e) => e.kind === "invalid-argument");
});
