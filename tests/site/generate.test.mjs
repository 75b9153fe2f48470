// The generation page end to end: the tiny random GGUF of tiny-model.mjs is loaded in headless
// Chromium (WebGPU on SwiftShader) and must generate exactly the ids the native CLI generates on
// lavapipe (both compute in f32 and choose by argmax, or draw with the same seeded counter-based
// RNG), with either strategy; bad model URLs and bad settings give typed errors. The page and the
// API are what this adds: the kernels' numerics in Chromium are tests/model_synthetic.rs's (three
// weight formats against the CPU reference), so the page's model is the one that compiles and
// runs fastest on SwiftShader (the 3-layer synthetic model's two tests took 167 s of CI).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { serve } from "../../scripts/serve.mjs";
import { launch } from "./chromium.mjs";
import { ensureTinyModel, root, tinyModel } from "./page.mjs";

const cli = `${root}target/debug/fuselm`;
const modelPath = tinyModel;
const prompt = "Hello";
const maxTokens = 12;

// Sampling settings for the seeded runs (the same seed gives the same ids on every adapter).
const sampling = { temperature: 0.9, topK: 40, seed: 7 };

const generateNative = (...extra) =>
  JSON.parse(
    execFileSync(
      cli,
      ["generate", "--model", modelPath, "--prompt", prompt, "--max-tokens", String(maxTokens), "--json", ...extra],
      { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] },
    ),
  );

let server, base, native, nativeSampled;
before(async () => {
  // The binary `npm test` built with the test binaries (`cargo test --no-run` builds it for them).
  // Not `cargo build --bin fuselm` here: without the dev-dependencies' features it rebuilt naga,
  // wgpu and their dependencies inside the test lane (2026-11-29).
  assert.ok(existsSync(cli), `no ${cli} (npm test builds it; alone: cargo build --bin fuselm)`);
  ensureTinyModel();
  native = generateNative();
  nativeSampled = generateNative(
    "--temperature", String(sampling.temperature), "--top-k", String(sampling.topK), "--seed", String(sampling.seed),
  );
  server = await serve(0);
  base = `http://127.0.0.1:${server.address().port}`;
});
after(async () => {
  await shared?.browser.close();
  server?.close();
});

async function open(browser, url) {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e));
  await page.goto(url);
  await page.waitForFunction(() => ["done", "error"].includes(document.body.dataset.state), null, { timeout: 300_000 });
  return { page, errors };
}

const pageUrl = (model, extra = "", autorun = "&autorun") =>
  `${base}/examples/site/generate.html?model=${encodeURIComponent(model)}&prompt=${encodeURIComponent(prompt)}` +
  `&maxTokens=${maxTokens}${extra}${autorun}`;

/**
 * The page of the first test (greedy, the default strategy, generated on load), which the second
 * test goes on using: one GPU device, so the model's load and kernels are paid once.
 */
let shared;
async function greedyPage() {
  if (!shared) {
    const browser = await launch();
    shared = { browser, ...(await open(browser, pageUrl(`/${modelPath}`))) };
  }
  return shared;
}

// The synthetic vocabulary (the tiny model's too): id b < 256 is byte b; the two control tokens
// render as nothing.
const decodeSynthetic = (ids) =>
  new TextDecoder("utf-8").decode(Uint8Array.from(ids.filter((id) => id < 256)));

test("the browser generates the native ids for the tiny model", async () => {
  {
    const { page, errors } = await greedyPage();
    const state = await page.evaluate(() => document.body.dataset.state);
    assert.equal(state, "done", await page.textContent("#status"));
    const result = JSON.parse(await page.textContent("#result"));
    assert.deepEqual(result.promptTokens, native.promptIds);
    assert.deepEqual(result.tokens, native.generatedIds, "greedy ids: browser (SwiftShader) vs native (lavapipe)");
    assert.equal(result.stopReason, native.stopReason);
    assert.equal(result.text, native.text);
    assert.equal(result.text, decodeSynthetic(result.tokens));
    assert.equal(await page.textContent("#text"), result.text);
    assert.equal(await page.textContent("#tokens"), result.tokens.join(" "));
    assert.ok(result.timings.prefillSeconds > 0 && result.timings.decodeSeconds >= 0);

    // The typed API from a page script: busy while generating, info, a disposed model.
    const api = await page.evaluate(async (url) => {
      const { loadModel, FuselmError } = await import("/dist/index.js");
      const kind = (e) => (e instanceof FuselmError ? e.kind : `untyped: ${e}`);
      const model = await loadModel(url, { nCtx: 64 });
      const info = model.info;
      const first = model.generate("Hi", { maxTokens: 4 });
      const second = await model.generate("Hi", { maxTokens: 4 }).result().then(() => "resolved", kind);
      const firstTokens = (await first.result()).tokens.length;
      const tooLong = await model.generate("Hi", { maxTokens: 100, contextShift: false }).result().then(() => "resolved", kind);
      // Past nCtx 64 the context shifts (the default): 100 tokens, the oldest dropped.
      const shifted = await model.generate("abc", { maxTokens: 100, keepTokens: 2 }).result();
      const after = (await model.generate("Hi", { maxTokens: 2 }).result()).tokens.length;
      await model.dispose();
      const freed = await model.generate("Hi").result().then(() => "resolved", kind);
      return { info, second, firstTokens, tooLong, after, freed, shifted: [shifted.promptTokens.length, shifted.tokens.length, shifted.stopReason, shifted.droppedTokens] };
    }, `/${modelPath}`);
    assert.equal(api.second, "busy");
    assert.equal(api.firstTokens, 4);
    assert.equal(api.tooLong, "limit-exceeded");
    // Each time the context reaches 64 the shift drops half of what follows the 2 kept tokens.
    const [promptLength] = api.shifted;
    let [length, dropped] = [promptLength, 0];
    for (let i = 0; i < 100; i++) {
      if (length === 64) [length, dropped] = [length - 31, dropped + 31];
      length++;
    }
    assert.deepEqual(api.shifted, [promptLength, 100, "length", dropped]);
    assert.equal(api.after, 2, "the model still works after a rejected generation");
    assert.equal(api.freed, "invalid-argument");
    const { architecture, layers, embeddingLength, feedForwardLength, heads, kvHeads, headDim, vocabSize, contextLength, nCtx, tiedOutput } = api.info;
    assert.deepEqual(
      { architecture, layers, embeddingLength, feedForwardLength, heads, kvHeads, headDim, vocabSize, contextLength, nCtx, tiedOutput },
      {
        architecture: "llama", layers: 1, embeddingLength: 64, feedForwardLength: 256, heads: 2, kvHeads: 2,
        headDim: 32, vocabSize: 258, contextLength: 512, nCtx: 64, tiedOutput: true,
      },
    );
    assert.deepEqual(api.info.quantTypes.map((q) => q.ggmlType).sort(), ["Q8_0"]);
    assert.ok(api.info.memory.total >= api.info.memory.weights + api.info.memory.kvCache);
    assert.deepEqual(errors, []);
  }
});

test("seeded sampling and the unfused strategy give the native ids in the browser", async () => {
  // Otherwise this test could pass with the sampling settings ignored.
  assert.notDeepEqual(nativeSampled.generatedIds, native.generatedIds, "sampling must differ from greedy here");
  {
    // The form: strategy, temperature, top-k and seed from the query string (a page that does not
    // run: no GPU work) ...
    const query = `&strategy=unfused&temperature=${sampling.temperature}&topK=${sampling.topK}&seed=${sampling.seed}`;
    const { page, errors } = await greedyPage();
    const form = await shared.browser.newPage();
    await form.goto(pageUrl(`/${modelPath}`, query, ""));
    const fields = ["strategy", "temperature", "top-k", "seed"];
    const values = await form.evaluate((ids) => ids.map((id) => document.getElementById(id).value), fields);
    assert.deepEqual(values, ["unfused", String(sampling.temperature), String(sampling.topK), String(sampling.seed)], "the query string fills the form");
    await form.close();
    // ... and those settings typed into the first test's page, whose model stays loaded, generate.
    await page.selectOption("#strategy", "unfused");
    for (const [id, value] of [["temperature", sampling.temperature], ["top-k", sampling.topK], ["seed", sampling.seed]]) {
      await page.fill(`#${id}`, String(value));
    }
    await page.click("#generate");
    await page.waitForFunction(() => ["done", "error"].includes(document.body.dataset.state), null, { timeout: 300_000 });
    assert.equal(await page.evaluate(() => document.body.dataset.state), "done", await page.textContent("#status"));
    const result = JSON.parse(await page.textContent("#result"));
    assert.deepEqual(result.tokens, nativeSampled.generatedIds, "seeded ids: browser unfused vs native fused");
    assert.equal(result.text, nativeSampled.text);

    // The typed API: fused sampling in chunks of 5, unfused greedy, settings out of range.
    const api = await page.evaluate(
      async ({ url, prompt, maxTokens, sampling }) => {
        const { loadModel, FuselmError } = await import("/dist/index.js");
        const kind = (e) => (e instanceof FuselmError ? e.kind : `untyped: ${e}`);
        const model = await loadModel(url, { nCtx: 64 });
        const gen = (options) => model.generate(prompt, { maxTokens, ...options }).result();
        const fusedSampled = (await gen({ ...sampling, strategy: "fused", chunkTokens: 5 })).tokens;
        const unfusedGreedy = (await gen({ strategy: "unfused" })).tokens;
        const rejected = [];
        for (const bad of [{ topK: 500 }, { topP: 0 }, { temperature: -1 }, { seed: 1.5 }, { strategy: "turbo" }]) {
          rejected.push(await gen(bad).then(() => "resolved", kind));
        }
        await model.dispose();
        return { fusedSampled, unfusedGreedy, rejected };
      },
      { url: `/${modelPath}`, prompt, maxTokens, sampling },
    );
    assert.deepEqual(api.fusedSampled, nativeSampled.generatedIds, "seeded ids: browser fused vs native fused");
    assert.deepEqual(api.unfusedGreedy, native.generatedIds, "greedy ids: browser unfused vs native fused");
    assert.deepEqual(api.rejected, Array(5).fill("invalid-argument"));
    assert.deepEqual(errors, []);
  }
});

test("a file that is not GGUF gives invalid-model, a missing one network", async () => {
  const browser = await launch();
  try {
    for (const [model, kind] of [["/README.md", "invalid-model"], ["/target/site-test/missing.gguf", "network"]]) {
      const { page } = await open(browser, pageUrl(model));
      assert.equal(await page.evaluate(() => document.body.dataset.state), "error", model);
      assert.equal(await page.evaluate(() => document.body.dataset.errorKind), kind, await page.textContent("#status"));
      await page.close();
    }
  } finally {
    await browser.close();
  }
});
