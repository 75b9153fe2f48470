// Leaks, measured in one page: 40 consecutive generations with the tiny random model
// (tiny-model.mjs; streamed, text(), chat completions, aborted ones; fused and unfused) must leave
// the live GPU buffers, the JS heap and the wasm memory where they were after generation 10;
// `model.dispose()` must give the GPU memory back.
// Live GPU buffers are counted by wrapping createBuffer/destroy (gpu-buffers.mjs); the JS heap is
// `performance.memory.usedJSHeapSize` (precise) after forced garbage collection (--expose-gc).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { launch } from "./chromium.mjs";
import { liveBuffers, trackGpuBuffers } from "./gpu-buffers.mjs";
import { assertNoProblems, ensureTinyModel, openPage, startServer } from "./page.mjs";

// A multiple of 8 (each kind on each strategy equally often) whose half is a multiple of 10 (the
// sample points). Generation 10 and the last both end on fused, so their live buffers compare.
const generations = 40;
const half = generations / 2;
// The page runs without V8's optimizing tiers (--no-opt --no-maglev --no-sparkplug): their code
// and feedback grew the heap by V8's own warm-up, which is not ours to bound. With them (SwiftShader,
// 2026-11-29) the heap grew +133 KB from generation 10 to 120 and +28 KB from 60 to 120, in steps
// (+37, +15, +47 KB over generations 10-20-30-40, +4 from 40 to 60), so catching a leak of 1 KB
// per generation took 120 generations (79 s, most of the test). Without them, the same day:
// +3.0, +1.2, +3.9 KB over 10-20-30-40 (+8.1 KB from 10 to 40, +5.1 KB from 20 to 40), the same
// bytes on every run. Our code's objects are the same in the interpreter, so a leak is too: one of
// 1 KB per generation adds 30 KB over generations 10-40 and 20 KB over 20-40, breaking both bounds
// (a leak of 0.55 KB per generation already breaks the second); the bounds leave 2-3x the measured
// growth for noise.
const heapGrowthBound = 32 * 1024; // bytes the JS heap may grow from generation 10 to the last
const heapSecondHalfBound = 16 * 1024; // ... and over the second half
// The wasm memory did not grow at all (2,031,616 bytes from generation 10 to 120, and to 40): a
// leak of 9 KB per generation breaks this within the 30 generations.
const wasmGrowthBound = 256 * 1024; // bytes the wasm linear memory may grow meanwhile
const disposeSlack = 64 * 1024; // bytes of live buffers allowed to survive dispose()

let server, base, tiny;
before(async () => {
  tiny = ensureTinyModel();
  ({ server, base } = await startServer());
});
after(() => server?.close());

// Runs in the page: the site's own module graph, so the model lives in this page.
async function setup(url) {
  const fuselm = await import("/dist/index.js");
  // The wasm module's memory: wasm-bindgen's init returns the instance's exports once initialised.
  const wasm = await (await import("/dist/wasm/fuselm.js")).default();
  window.__memory = () => {
    for (let i = 0; i < 3; i++) window.gc();
    return {
      gpu: window.__gpuBuffers(),
      heap: performance.memory.usedJSHeapSize,
      wasm: wasm.memory.buffer.byteLength,
    };
  };
  const beforeLoad = window.__memory();
  window.__model = await fuselm.loadModel(url, { nCtx: 128 });
  window.__fuselm = fuselm;
  return { beforeLoad, afterLoad: window.__memory() };
}

// Runs in the page: generations from..to, each of one of four kinds, short; the strategy
// alternates every four.
async function generate({ from, to }) {
  const model = window.__model;
  const kinds = {};
  for (let i = from; i <= to; i++) {
    const kind = ["stream", "text", "chat", "abort"][i % 4];
    const strategy = Math.floor(i / 4) % 2 ? "unfused" : "fused";
    kinds[kind] = (kinds[kind] ?? 0) + 1;
    kinds[strategy] = (kinds[strategy] ?? 0) + 1;
    if (kind === "stream") {
      let n = 0;
      for await (const chunk of model.generate(`Hello ${i}`, { maxTokens: 3, strategy })) n += chunk.tokenIds.length;
      if (n === 0) throw new Error(`generation ${i}: no tokens`);
    } else if (kind === "text") {
      await model.generate(`Count ${i}`, { maxTokens: 3, temperature: 0.8, seed: i, strategy }).text();
    } else if (kind === "chat") {
      const stream = await model.chat.completions.create({
        messages: [{ role: "user", content: `Hi ${i}` }], stream: true, max_tokens: 3, temperature: 0.7, seed: i, strategy,
      });
      for await (const chunk of stream) void chunk;
    } else {
      const controller = new AbortController();
      const generation = model.generate(`Stop ${i}`, { maxTokens: 32, chunkTokens: 1, signal: controller.signal, strategy });
      try {
        for await (const chunk of generation) {
          void chunk;
          controller.abort();
        }
      } catch (e) {
        if (e?.kind !== "aborted") throw e;
      }
    }
  }
  return kinds;
}

test(`${generations} generations in one page: flat GPU buffers, JS heap and wasm memory; dispose frees the GPU memory`, async () => {
  const browser = await launch({ args: ["--js-flags=--expose-gc --no-opt --no-maglev --no-sparkplug", "--enable-precise-memory-info"] });
  try {
    const { page, problems } = await openPage(browser, `${base}/examples/site/chat.html`, { init: trackGpuBuffers });
    const { beforeLoad, afterLoad } = await page.evaluate(setup, tiny);
    const samples = [];
    const kinds = {};
    const t0 = Date.now();
    for (let from = 1; from <= generations; from += 10) {
      const done = await page.evaluate(generate, { from, to: from + 9 });
      for (const [k, n] of Object.entries(done)) kinds[k] = (kinds[k] ?? 0) + n;
      if ([10, half, generations].includes(from + 9)) samples.push({ after: from + 9, ...(await page.evaluate(() => window.__memory())) });
    }
    const seconds = (Date.now() - t0) / 1000;
    const at10 = samples.find((s) => s.after === 10);
    const atEnd = samples.find((s) => s.after === generations);
    const disposed = await page.evaluate(async () => {
      await window.__model.dispose();
      const after = window.__memory();
      let later = "resolved";
      try {
        await window.__model.generate("Hi").text();
      } catch (e) {
        later = e?.kind ?? String(e);
      }
      return { after, later };
    });
    const report = {
      seconds,
      kinds,
      beforeLoad: beforeLoad.gpu,
      afterLoad: afterLoad.gpu,
      samples: samples.map((s) => ({ after: s.after, buffers: s.gpu.count, bufferBytes: s.gpu.bytes, heap: s.heap, wasm: s.wasm })),
      afterDispose: disposed.after.gpu,
    };
    console.log(JSON.stringify(report, null, 1));

    const quarter = generations / 4;
    assert.deepEqual(kinds, { stream: quarter, text: quarter, chat: quarter, abort: quarter, fused: half, unfused: half });
    assert.equal(atEnd.gpu.count, at10.gpu.count, `live GPU buffers after generation ${generations} = after generation 10`);
    assert.equal(atEnd.gpu.bytes, at10.gpu.bytes, `live GPU buffer bytes after generation ${generations} = after generation 10`);
    assert.ok(atEnd.heap - at10.heap <= heapGrowthBound, `JS heap grew ${atEnd.heap - at10.heap} bytes (bound ${heapGrowthBound})`);
    const atHalf = samples.find((s) => s.after === half);
    assert.ok(
      atEnd.heap - atHalf.heap <= heapSecondHalfBound,
      `JS heap grew ${atEnd.heap - atHalf.heap} bytes from generation ${half} to ${generations} (bound ${heapSecondHalfBound})`,
    );
    assert.ok(atEnd.wasm - at10.wasm <= wasmGrowthBound, `wasm memory grew ${atEnd.wasm - at10.wasm} bytes (bound ${wasmGrowthBound})`);

    assert.ok(afterLoad.gpu.bytes > beforeLoad.gpu.bytes + 100_000, "the model's buffers are counted");
    assert.ok(
      disposed.after.gpu.bytes <= beforeLoad.gpu.bytes + disposeSlack,
      `after dispose ${disposed.after.gpu.bytes} bytes live, before load ${beforeLoad.gpu.bytes}`,
    );
    assert.equal(disposed.later, "invalid-argument", "a disposed model rejects");
    assert.deepEqual(await liveBuffers(page), disposed.after.gpu);
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

test(
  "dispose() frees the GPU memory at once, without waiting for garbage collection",
  async () => {
    const browser = await launch();
    try {
      const { page, problems } = await openPage(browser, `${base}/examples/site/chat.html`, { init: trackGpuBuffers });
      const result = await page.evaluate(async (url) => {
        const { loadModel } = await import("/dist/index.js");
        const before = window.__gpuBuffers();
        const model = await loadModel(url, { nCtx: 64 });
        await model.generate("Hi", { maxTokens: 2 }).text();
        const loaded = window.__gpuBuffers();
        await model.dispose();
        return { before, loaded, disposed: window.__gpuBuffers() };
      }, tiny);
      console.log(JSON.stringify(result));
      assert.ok(result.loaded.bytes > result.before.bytes + 100_000);
      assert.ok(
        result.disposed.bytes <= result.before.bytes + disposeSlack,
        `right after dispose(): ${result.disposed.count} buffers, ${result.disposed.bytes} bytes live (${result.disposed.destroyed} destroyed)`,
      );
      assert.equal(result.disposed.destroyed - result.loaded.destroyed, result.loaded.count, "every live buffer destroyed, not left to GC");
      assertNoProblems(problems);
    } finally {
      await browser.close();
    }
  },
);
