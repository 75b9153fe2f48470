// Options are checked in TypeScript as the caller wrote them: a wrong type or a value out of range
// is an invalid-argument FuselmError naming the option and its rule, before any download, build
// or wasm call (so this runs in Node without a GPU).
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fuselm = await import(pathToFileURL(join(root, "dist/index.js")).href);
const { checkOptions, GENERATE_RULES } = await import(pathToFileURL(join(root, "dist/options.js")).href);
const { chatCompletions } = await import(pathToFileURL(join(root, "dist/chat.js")).href);

const message = async (promise) =>
  promise.then(
    () => "resolved",
    (e) => (e instanceof fuselm.FuselmError ? `${e.kind}: ${e.message}` : `untyped: ${e}`),
  );

test("loadModel: bad options are refused before the download, named as written", async () => {
  const url = "http://127.0.0.1:9/never-fetched.gguf";
  for (const [options, want] of [
    [{ nCtx: -1 }, "nCtx must be an integer in 1..4294967295, got -1"],
    [{ nCtx: 1.5 }, "nCtx must be an integer in 1..4294967295, got 1.5"],
    [{ maxBatch: "8" }, 'maxBatch must be an integer in 1..4294967295, got "8"'],
    [{ kvF16: "yes" }, 'kvF16 must be a boolean, got "yes"'],
    [{ strategy: "turbo" }, 'strategy must be one of "fused", "unfused", "megakernel", "megakernel-grid", got "turbo"'],
    [{ cache: "disk" }, 'cache must be one of "cache-api", "opfs", "none", got "disk"'],
    [{ worker: 1 }, "worker must be a boolean, got 1"],
    [{ onProgress: "log" }, 'onProgress must be a function, got "log"'],
  ]) {
    assert.equal(await message(fuselm.loadModel(url, options)), `invalid-argument: ${want}`);
  }
  assert.equal(await message(fuselm.loadModel(url, 7)), "invalid-argument: options must be an object, got 7");
});

test("generate options: every rule names the option", () => {
  const cases = [
    [{ maxTokens: -1 }, "maxTokens must be an integer in 0..4294967295, got -1"],
    [{ temperature: Number.NaN }, "temperature must be a finite number ≥ 0, got NaN"],
    [{ temperature: -1 }, "temperature must be a finite number ≥ 0, got -1"],
    [{ topK: 500 }, "topK must be an integer in 0..128, got 500"],
    [{ topP: 0 }, "topP must be a number in (0, 1], got 0"],
    [{ seed: 1.5 }, "seed must be an integer ≥ 0, got 1.5"],
    [{ stop: "x" }, 'stop must be an array of strings, got "x"'],
    [{ chunkTokens: 0 }, "chunkTokens must be an integer in 1..4294967295, got 0"],
    [{ responseFormat: "json" }, 'responseFormat must be an object, got "json"'],
    [{ chat: "yes" }, 'chat must be a boolean, got "yes"'],
    [{ strategy: "fast" }, 'strategy must be one of "fused", "unfused", "megakernel", "megakernel-grid", got "fast"'],
  ];
  for (const [options, want] of cases) {
    assert.throws(() => checkOptions(options, GENERATE_RULES), (e) => e.kind === "invalid-argument" && e.message === want, want);
  }
  checkOptions({ maxTokens: 0, temperature: 0.7, topK: 40, topP: 1, seed: 42, stop: ["\n"], responseFormat: { type: "text" } }, GENERATE_RULES);
});

test("chat requests: named in OpenAI's words", async () => {
  const completions = chatCompletions(() => {
    throw new Error("never run");
  }, () => "m");
  const messages = [{ role: "user", content: "Hi" }];
  for (const [request, want] of [
    [{ messages, max_tokens: -1 }, "max_tokens must be an integer in 0..4294967295, got -1"],
    [{ messages, top_p: 2 }, "top_p must be a number in (0, 1], got 2"],
    [{ messages, temperature: "hot" }, 'temperature must be a finite number ≥ 0, got "hot"'],
    [{ messages, cache_prompt: 1 }, "cache_prompt must be a boolean, got 1"],
  ]) {
    assert.equal(await message(completions.create(request)), `invalid-argument: ${want}`);
  }
});
