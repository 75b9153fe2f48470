// The npm package's API in headless Chromium (WebGPU on SwiftShader), used as an app would:
// every kind of model source with its progress, refusal before the download, generation streams,
// stop sequences, OpenAI-shaped chat with KV-prefix reuse, abort, busy, tokenization, device loss
// and a new load after it, the worker mode, and the JS memory a load of the real model takes.
// The page is blank, with /dist/index.js imported inside it; most tests share one such page
// (sharedPage: one device, kernels compiled once).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { launch } from "../site/chromium.mjs";
import { openPage, assertNoProblems, startServer, root, realModel } from "../site/page.mjs";
import { trackGpuBuffers } from "../site/gpu-buffers.mjs";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

/** The synthetic model with every matrix in Q8_0: one weight format, so each load compiles a
 * third of the kernels the mixed-format one needs (loads dominate this file's time on SwiftShader). */
function ensureUniformModel() {
  const path = "target/site-test/synthetic-q8.gguf";
  const cli = ["target/debug/fuselm", "target/release/fuselm"].find((p) => existsSync(`${root}${p}`));
  assert.ok(cli, "no target/{debug,release}/fuselm to write the synthetic model with (cargo build first)");
  execFileSync(`${root}${cli}`, ["synthetic-model", path, "--matrix-type", "Q8_0"], { cwd: root, stdio: "inherit" });
  return `/${path}`;
}

let server, base, browser, model;
before(async () => {
  model = ensureUniformModel();
  ({ server, base } = await startServer());
  browser = await launch({ args: ["--enable-precise-memory-info"] });
});
after(async () => {
  await browser?.close();
  server?.close();
});

/** A blank page with the package imported as `window.f`. */
async function sdkPage(options = {}) {
  const { page, problems } = await openPage(browser, `${base}/tests/sdk/blank.html`, options);
  await page.evaluate(async () => {
    window.f = await import("/dist/index.js");
  });
  return { page, problems };
}

/**
 * The blank page most tests share, with the GPU buffer tracker (gpu-buffers.mjs) installed: one
 * page, so one GPU device, whose compiled kernels every later load of the synthetic model reuses.
 * A fresh page per test compiled them again each time (first load 9 s on SwiftShader beside the
 * native lane, a strategy's kernels again on its first generation): ~3/4 of this file's CPU time
 * went to compiling. Each test disposes what it loads. Tests that need a fresh device (the
 * kernel-compile count, device loss) or a fresh wasm memory (the real model's load) open their
 * own page with sdkPage(). `problems` holds what the page logged during this test only; `allow`
 * lists the console errors this test expects.
 */
let shared;
async function sharedPage({ allow = [] } = {}) {
  if (!shared) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    shared = { page, problems: [], allow: [] };
    page.on("console", (m) => {
      if (m.type() === "error" && !shared.allow.some((re) => re.test(m.text()))) shared.problems.push(`console error: ${m.text()}`);
    });
    page.on("pageerror", (e) => shared.problems.push(`uncaught: ${e.stack ?? e.message}`));
    await page.addInitScript(trackGpuBuffers);
    await page.goto(`${base}/tests/sdk/blank.html`);
    await page.evaluate(async () => {
      window.f = await import("/dist/index.js");
    });
  }
  shared.problems = [];
  shared.allow = allow;
  return { page: shared.page, problems: shared.problems };
}

test("every model source loads the same model, with progress through every phase", async () => {
  const { page, problems } = await sharedPage();
  const size = statSync(`${root}${model.slice(1)}`).size;
  const out = await page.evaluate(async (url) => {
    const sources = {
      url: () => url,
      URL: () => new URL(url, location.href),
      Request: () => new Request(url),
      Response: async () => fetch(url),
      ArrayBuffer: async () => (await fetch(url)).arrayBuffer(),
      Uint8ArrayView: async () => {
        const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
        const padded = new Uint8Array(bytes.length + 10);
        padded.set(bytes, 7);
        return padded.subarray(7, 7 + bytes.length);
      },
      Blob: async () => (await fetch(url)).blob(),
      File: async () => new File([await (await fetch(url)).blob()], "model.gguf"),
      ReadableStream: async () => (await fetch(url)).body,
    };
    const results = {};
    for (const [name, make] of Object.entries(sources)) {
      const events = [];
      const m = await window.f.loadModel(await make(), { nCtx: 64, onProgress: (p) => events.push(p) });
      const r = await m.generate("Hello", { maxTokens: 6 }).result();
      await m.dispose();
      results[name] = { tokens: r.tokens, events };
    }
    return results;
  }, model);
  const reference = out.url.tokens;
  assert.equal(reference.length, 6);
  for (const [name, { tokens, events }] of Object.entries(out)) {
    assert.deepEqual(tokens, reference, `${name}: same ids`);
    const phases = [...new Set(events.map((e) => e.phase))];
    assert.deepEqual(phases, ["download", "parse", "upload", "compile"], name);
    const loaded = events.map((e) => e.loadedBytes);
    assert.deepEqual(loaded, [...loaded].sort((a, b) => a - b), `${name}: loadedBytes never goes back`);
    const last = events.at(-1);
    assert.equal(last.loadedBytes, size, name);
    assert.equal(last.totalBytes, size, `${name}: the size is known by the end (from the source or the header)`);
    assert.ok(events.every((e) => e.fromCache === false), name);
  }
  assertNoProblems(problems);
});

test("a model over the adapter's limits is refused from its header, before the weights download", async () => {
  const { page, problems } = await sharedPage();
  const real = `/${realModel}`;
  const size = statSync(`${root}${realModel}`).size;
  const out = await page.evaluate(async (url) => {
    let most = 0;
    const e = await window.f
      .loadModel(url, { nCtx: 2 ** 30, onProgress: (p) => (most = Math.max(most, p.loadedBytes)) })
      .catch((e) => e);
    return { name: e.name, kind: e.kind, limit: e.limit, needed: e.needed, available: e.available, message: e.message, most };
  }, real);
  assert.equal(out.name, "FuselmError");
  assert.equal(out.kind, "limit-exceeded", out.message);
  assert.equal(out.limit, "maxStorageBufferBindingSize");
  assert.ok(out.needed > out.available, JSON.stringify(out));
  assert.ok(out.most < 4 << 20, `refused after ${out.most} of ${size} bytes`);
  assertNoProblems(problems);
});

test("bad sources and options are typed errors, and the page stays usable", async () => {
  const { page, problems } = await sharedPage({ allow: [/404 \(Not Found\)/] });
  const out = await page.evaluate(async (url) => {
    const kind = (p) => Promise.resolve(p).then(() => "resolved", (e) => `${e.name}:${e.kind}`);
    const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
    const m = await window.f.loadModel(bytes, { nCtx: 64 });
    const r = {
      missing: await kind(window.f.loadModel("/no/such/model.gguf")),
      notGguf: await kind(window.f.loadModel(new TextEncoder().encode("not a model at all, just text"))),
      truncated: await kind(window.f.loadModel(bytes.subarray(0, bytes.length - 1000))),
      badSource: await kind(window.f.loadModel(42)),
      badCache: await kind(window.f.loadModel(url, { cache: "disk" })),
      // Refused before the download: the URL does not exist.
      badStrategy: await kind(window.f.loadModel("/no/such/model.gguf", { strategy: "turbo" })),
      abortedBefore: await kind(window.f.loadModel(url, { signal: AbortSignal.abort() })),
      badTemperature: await kind(m.generate("Hi", { temperature: -1 }).result()),
      tooLong: await kind(m.generate("Hi", { maxTokens: 64, contextShift: false }).result()),
      noMessages: await kind(m.chat.completions.create({ messages: [] })),
      badRole: await kind(m.chat.completions.create({ messages: [{ role: 42, content: "x" }] })),
      badIds: await kind(m.detokenize([1e9])),
    };
    r.htmlHint = await window.f.loadModel(new TextEncoder().encode("<!DOCTYPE html><html></html>")).then(() => "", (e) => e.message);
    r.afterwards = (await m.generate("Hi", { maxTokens: 4 }).result()).tokens.length;
    await m.dispose();
    return r;
  }, model);
  assert.match(out.htmlHint, /the server returned an HTML page, not a GGUF file/);
  delete out.htmlHint;
  assert.deepEqual(out, {
    missing: "FuselmError:network",
    notGguf: "FuselmError:invalid-model",
    truncated: "FuselmError:invalid-model",
    badSource: "FuselmError:invalid-argument",
    badCache: "FuselmError:invalid-argument",
    badStrategy: "FuselmError:invalid-argument",
    abortedBefore: "FuselmError:aborted",
    badTemperature: "FuselmError:invalid-argument",
    tooLong: "FuselmError:limit-exceeded",
    noMessages: "FuselmError:invalid-argument",
    badRole: "FuselmError:invalid-argument",
    badIds: "FuselmError:invalid-argument",
    afterwards: 4,
  });
  assertNoProblems(problems);
});

test("generate streams chunks, stop sequences are never emitted, abort and busy leave the model usable", async () => {
  const { page, problems } = await sharedPage();
  const out = await page.evaluate(async (url) => {
    // maxBatch 8: a long prompt is prefilled in many batches (the abort below lands among them).
    const m = await window.f.loadModel(url, { nCtx: 512, maxBatch: 8 });
    const g = m.generate("Hello", { maxTokens: 24, chunkTokens: 4 });
    const chunks = [];
    for await (const c of g) chunks.push(c);
    const r = await g.result();
    // A stop sequence from the middle of the free text, spanning tokens (one token per byte here).
    const stop = r.text.slice(6, 9);
    const stopped = m.generate("Hello", { maxTokens: 24, chunkTokens: 4, stop: [stop] });
    let streamed = "";
    for await (const c of stopped) streamed += c.text;
    const s = await stopped.result();
    // Abort after the first chunk.
    const ac = new AbortController();
    const long = m.generate("Hello", { maxTokens: 200, chunkTokens: 2, signal: ac.signal });
    let seen = 0, abortError;
    try {
      for await (const c of long) if (++seen === 1) ac.abort(new Error("user pressed stop"));
    } catch (e) {
      abortError = { name: e.name, kind: e.kind, message: e.message };
    }
    // One generation at a time: the second is "busy", the first unaffected.
    const first = m.generate("Hello", { maxTokens: 8 });
    const second = m.generate("Hello", { maxTokens: 8 });
    const busy = await second.result().then(() => "resolved", (e) => e.kind);
    const firstTokens = (await first.result()).tokens;
    const text = await m.generate("Hello", { maxTokens: 24 }).text();
    // Abort during a long prompt (one token per byte: 30 batches of 8): it takes effect between
    // prefill batches, not after the whole prompt.
    const prompt = "abcdefghij".repeat(24);
    let t0 = performance.now();
    await m.generate(prompt, { maxTokens: 1 }).result();
    const prefillMs = performance.now() - t0;
    const ac2 = new AbortController();
    const during = m.generate(prompt, { maxTokens: 1, signal: ac2.signal });
    await new Promise((r) => setTimeout(r, prefillMs / 4));
    t0 = performance.now();
    ac2.abort();
    const prefillAbort = await during.result().then(() => "resolved", (e) => e.kind);
    const abortMs = performance.now() - t0;
    const after = (await m.generate("Hello", { maxTokens: 8 }).result()).tokens;
    await m.dispose();
    return { chunks, r, stop, streamed, s, seen, abortError, busy, firstTokens, text, prefillMs, prefillAbort, abortMs, after };
  }, model);
  console.log(`abort during prefill: ${out.abortMs.toFixed(1)} ms after abort() (whole 240-token prefill ${out.prefillMs.toFixed(1)} ms, batches of 8)`);
  assert.equal(out.prefillAbort, "aborted");
  assert.ok(out.abortMs < out.prefillMs / 3, `abort took ${out.abortMs} ms of a ${out.prefillMs} ms prefill`);
  assert.deepEqual(out.after, out.r.tokens.slice(0, 8), "usable after an abort during prefill");
  const { chunks, r } = out;
  assert.ok(chunks.length >= 4, `streamed in ${chunks.length} chunks`);
  assert.deepEqual(chunks.flatMap((c) => c.tokenIds), r.tokens);
  assert.equal(chunks.map((c) => c.text).join(""), r.text);
  assert.equal(r.stopReason, "length");
  assert.equal(out.text, r.text, "text() is the whole answer");
  assert.equal(out.s.stopReason, "stop-sequence");
  assert.equal(out.s.text, r.text.slice(0, r.text.indexOf(out.stop)));
  assert.equal(out.streamed, out.s.text, "no part of the stop sequence was streamed");
  assert.equal(out.seen, 1);
  assert.deepEqual(out.abortError, { name: "FuselmError", kind: "aborted", message: "the generation was aborted: user pressed stop" });
  assert.equal(out.busy, "busy");
  assert.deepEqual(out.firstTokens, r.tokens.slice(0, 8));
  assertNoProblems(problems);
});

test("chat.completions has the OpenAI shape and reuses the KV cache of earlier turns, also from a saved session after a reload", async () => {
  const { page, problems } = await sharedPage();
  const out = await page.evaluate(async (url) => {
    const f = window.f;
    const kind = (e) => (e instanceof f.FuselmError ? `${e.kind}: ${e.message}` : `untyped: ${e}`);
    const m = await f.loadModel(url, { nCtx: 384 });
    const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi there" }];
    const first = await m.chat.completions.create({ messages, max_tokens: 8, seed: 3, temperature: 0.8 });
    // The conversation so far, kept in both stores as an app would before a reload.
    const saved = await m.saveSession();
    await f.storeSession("chat", saved);
    await f.storeSession("chat", saved, { store: "cache-api" });
    messages.push(first.choices[0].message, { role: "user", content: "And then?" });
    const stream = await m.chat.completions.create({ messages, max_tokens: 8, stream: true });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    const fresh = await m.chat.completions.create({ messages, max_tokens: 8, cache_prompt: false });
    await m.dispose();
    // "After the reload": another load, in a worker (the bytes cross to it), restores the
    // session from OPFS and answers the second turn as the original did.
    const w = await f.loadModel(url, { nCtx: 384, worker: true });
    const stored = await f.readSession("chat");
    const restored = await w.loadSession(stored);
    const again = await w.chat.completions.create({ messages, max_tokens: 8 });
    const resaved = await w.saveSession();
    const damaged = stored.slice();
    damaged[60] ^= 1;
    const errors = [
      await w.loadSession(damaged).then(() => "resolved", kind),
      await w.loadSession("bytes?").then(() => "resolved", kind),
      await f.storeSession("", saved).then(() => "resolved", kind),
      await f.readSession("chat", { store: "localStorage" }).then(() => "resolved", kind),
    ];
    const after = await w.chat.completions.create({ messages, max_tokens: 2 });
    await w.dispose();
    const fromCache = await f.readSession("chat", { store: "cache-api" });
    await f.deleteSession("chat");
    await f.deleteSession("chat", { store: "cache-api" });
    const gone = [await f.readSession("chat"), await f.readSession("chat", { store: "cache-api" })];
    const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
    return {
      first, chunks, fresh, restored, again, errors, after,
      savedLength: saved.length, resavedType: Object.prototype.toString.call(resaved), resavedLength: resaved.length,
      storedSame: same(stored, saved), cacheSame: same(fromCache, saved), gone: gone.map(String),
    };
  }, model);
  const { first, chunks, fresh, restored, again, errors, after } = out;
  assert.equal(first.object, "chat.completion");
  assert.match(first.id, /^chatcmpl-/);
  assert.equal(first.choices.length, 1);
  assert.equal(first.choices[0].message.role, "assistant");
  assert.ok(["stop", "length"].includes(first.choices[0].finish_reason));
  assert.equal(first.usage.total_tokens, first.usage.prompt_tokens + first.usage.completion_tokens);
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  assert.ok(chunks.every((c) => c.object === "chat.completion.chunk" && c.id === chunks[0].id));
  assert.deepEqual(chunks[0].choices[0].delta, { role: "assistant", content: "" });
  const last = chunks.at(-1);
  assert.ok(["stop", "length"].includes(last.choices[0].finish_reason));
  assert.ok(chunks.slice(0, -1).every((c) => c.choices[0].finish_reason === null && c.usage === undefined));
  const streamed = chunks.map((c) => c.choices[0].delta.content ?? "").join("");
  assert.equal(streamed, fresh.choices[0].message.content, "reuse gives the fresh context's answer");
  // The second turn's prompt starts with the first turn's prompt: all of it is reused.
  assert.ok(last.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens, JSON.stringify(last.usage));
  assert.equal(fresh.usage.prompt_tokens_details.cached_tokens, 0);
  // The saved session: the first turn's prompt and answer (but its last token), stored and read
  // back unchanged from OPFS and Cache Storage; restored in another load, it answers the second
  // turn exactly as the original did, prefilling only the new turn.
  assert.ok(out.storedSame && out.cacheSame, "the stores return the bytes they were given");
  assert.deepEqual(restored, { tokens: first.usage.prompt_tokens + first.usage.completion_tokens - 1, bytes: out.savedLength });
  assert.equal(again.choices[0].message.content, fresh.choices[0].message.content, "the restored session answers as the original");
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, last.usage.prompt_tokens_details.cached_tokens);
  assert.equal(out.resavedType, "[object Uint8Array]");
  assert.ok(out.resavedLength > out.savedLength, "the second turn grew the session");
  assert.match(errors[0], /^session: the session is damaged/);
  assert.match(errors[1], /^invalid-argument: loadSession\(bytes\): bytes must be a Uint8Array/);
  assert.match(errors[2], /^invalid-argument: name must be a string/);
  assert.match(errors[3], /^invalid-argument: store must be "opfs" or "cache-api"/);
  assert.equal(after.usage.completion_tokens, 2, "the model stays usable after a refused session");
  assert.deepEqual(out.gone, ["undefined", "undefined"]);
  assertNoProblems(problems);
});

test("structured output: responseFormat and response_format give valid JSON, the same on fused and unfused", async () => {
  // Short outputs (~20 tokens): fused decodes ~1 token/s on SwiftShader. The schema corpus runs
  // natively (tests/constraint.rs).
  const schema = {
    type: "object",
    properties: { ok: { type: "boolean" }, n: { type: "integer", minimum: 0, maximum: 99 }, tag: { enum: ["a", "bc"] } },
    required: ["ok", "n"],
    additionalProperties: false,
  };
  const { page, problems } = await sharedPage();
  const add = {
    type: "function",
    function: {
      name: "add",
      description: "Adds two digits",
      parameters: { type: "object", properties: { a: { type: "integer", minimum: 0, maximum: 9 }, b: { type: "integer", minimum: 0, maximum: 9 } }, required: ["a", "b"], additionalProperties: false },
    },
  };
  const echo = { type: "function", function: { name: "echo", parameters: { type: "object", properties: { s: { enum: ["x", "y"] } }, required: ["s"], additionalProperties: false } } };
  const out = await page.evaluate(async ({ url, schema, add, echo }) => {
    const kind = (e) => (e instanceof window.f.FuselmError ? `${e.kind}: ${e.message}` : `untyped: ${e}`);
    // The tools' description is ~600 tokens of this byte vocabulary.
    const m = await window.f.loadModel(url, { nCtx: 1024 });
    const responseFormat = { type: "json_schema", schema };
    // Compiled ahead: the first generation with it finds it in the model's cache.
    const prepared = [await m.prepareResponseFormat(responseFormat), await m.prepareResponseFormat(responseFormat)];
    const badPrepare = await m.prepareResponseFormat({ type: "regex", pattern: "(" }).then(() => "resolved", kind);
    const run = (strategy, extra = {}) => m.generate("Hello", { maxTokens: 40, responseFormat, strategy, ...extra }).result();
    const fused = await run("fused");
    const unfused = await run("unfused");
    // Seeded: the host mask (unfused) against the megakernel's GPU mask below (fused's seeded
    // run is the native tests'; it decodes ~2 tokens/s on SwiftShader).
    const sampled = await run("unfused", { temperature: 0.9, seed: 5 });
    const messages = [{ role: "user", content: "Who is it?" }];
    const chat = await m.chat.completions.create({
      messages,
      max_tokens: 40,
      response_format: { type: "json_schema", json_schema: { name: "answer", schema, strict: true } },
    });
    const object = await m.chat.completions.create({ messages, max_tokens: 16, response_format: { type: "json_object" } });
    const regex = await m.generate("Hi", { maxTokens: 20, responseFormat: { type: "regex", pattern: "[0-9]{3}-[a-z]{2}" } }).result();
    // A GBNF grammar in WebLLM's chat shape; a broken one names its line and column.
    const grammar = 'root ::= "<" item ("," item){1,2} ">"\nitem ::= [a-c]{1,2}\n';
    const gbnf = await m.chat.completions.create({ messages, max_tokens: 16, response_format: { type: "grammar", grammar } });
    const badGrammar = await m.generate("Hi", { responseFormat: { type: "grammar", grammar: "root ::= x" } }).result().then(() => "resolved", kind);
    const errors = [];
    for (const bad of [{ type: "json_schema", schema: { type: "string", not: {} } }, { type: "regex", pattern: "(" }, { type: "yaml" }]) {
      errors.push(await m.generate("Hi", { responseFormat: bad }).result().then(() => "resolved", kind));
    }
    errors.push(await m.chat.completions.create({ messages, response_format: { type: "json_schema" } }).then(() => "resolved", kind));
    // The megakernel masks and advances the constraint inside its one dispatch (Tint's build).
    const megakernel = [await run("megakernel"), await run("megakernel", { temperature: 0.9, seed: 5 })];
    // A tool call end to end (the call format compiled over this vocabulary, held on the GPU);
    // streaming, auto, parallel calls and later turns are tests/node/chat-tools.test.mjs.
    const callTools = [add, echo];
    const required = await m.chat.completions.create({ messages, tools: callTools, tool_choice: "required", parallel_tool_calls: false, max_tokens: 56 });
    errors.push(await m.chat.completions.create({ messages, tools: callTools, tool_choice: { type: "function", function: { name: "nope" } } }).then(() => "resolved", kind));
    errors.push(await m.chat.completions.create({ messages, tools: [{ type: "function", function: { name: "bad name!" } }] }).then(() => "resolved", kind));
    // Log-probabilities: the GPU kernels (fused, compiled by Tint here) against the CPU
    // reference (unfused), and in a chat answer.
    const lp = {};
    for (const strategy of ["fused", "unfused"]) {
      lp[strategy] = await m.generate("Hi", { maxTokens: 4, strategy, logprobs: true, topLogprobs: 3 }).result();
    }
    lp.chat = await m.chat.completions.create({ messages, max_tokens: 3, strategy: "fused", logprobs: true, top_logprobs: 2 });
    errors.push(await m.generate("Hi", { logprobs: true, topLogprobs: 25 }).result().then(() => "resolved", kind));
    const after = (await m.generate("Hi", { maxTokens: 3 }).result()).tokens.length;
    await m.dispose();
    return { fused, unfused, sampled, chat, object, regex, gbnf, badGrammar, errors, megakernel, after, required, lp, prepared, badPrepare };
  }, { url: model, schema, add, echo });
  const ajv = new Ajv2020({ strict: true });
  addFormats(ajv);
  const valid = ajv.compile(schema);
  for (const [name, r] of [["fused", out.fused], ["unfused", out.unfused], ["sampled unfused", out.sampled]]) {
    assert.equal(r.stopReason, "end-of-generation", `${name}: ${r.text}`);
    assert.ok(valid(JSON.parse(r.text)), `${name}: ${r.text} ${JSON.stringify(valid.errors)}`);
  }
  assert.deepEqual(out.fused.tokens, out.unfused.tokens, "greedy: fused (GPU mask) vs unfused (host mask)");
  const [first, again] = out.prepared;
  assert.equal(first.cached, false);
  assert.equal(again.cached, true);
  assert.ok(first.states > 0 && first.masks > 0 && first.tableBytes > 0, JSON.stringify(first));
  assert.deepEqual([again.states, again.masks, again.tableBytes], [first.states, first.masks, first.tableBytes]);
  assert.ok(out.fused.timings.constraintSeconds < 0.05, `prepared: the generation did not compile (${out.fused.timings.constraintSeconds} s)`);
  assert.match(out.badPrepare, /^constraint: .*regular expression/);
  assert.equal(out.chat.choices[0].finish_reason, "stop");
  assert.ok(valid(JSON.parse(out.chat.choices[0].message.content)), out.chat.choices[0].message.content);
  const object = out.object.choices[0];
  if (object.finish_reason === "stop") assert.equal(typeof JSON.parse(object.message.content), "object");
  else assert.match(object.message.content, /^\{/);
  // Six characters, then only the end of generation is allowed.
  assert.equal(out.regex.stopReason, "end-of-generation");
  assert.match(out.regex.text, /^[0-9]{3}-[a-z]{2}$/);
  const gbnf = out.gbnf.choices[0];
  if (gbnf.finish_reason === "stop") assert.match(gbnf.message.content, /^<[a-c]{1,2}(,[a-c]{1,2}){1,2}>$/);
  else assert.match(gbnf.message.content, /^<[a-c,]*$/);
  assert.match(out.badGrammar, /^constraint: .*grammar, line 1, column 10: rule "x" is used but never defined/);
  assert.match(out.errors[0], /^constraint: .*unsupported JSON Schema keyword "not" at #/);
  assert.match(out.errors[1], /^constraint: .*regular expression/);
  assert.match(out.errors[2], /^invalid-argument: /);
  assert.match(out.errors[3], /^invalid-argument: response_format.json_schema/);
  assert.deepEqual(out.megakernel.map((r) => r.tokens), [out.fused.tokens, out.sampled.tokens], "megakernel vs fused greedy, vs unfused seeded");
  assert.equal(out.after, 3, "the model still works");
  // Log-probabilities: one per token, the same on both strategies within 1e-3, best first,
  // greedy's choice the most likely.
  assert.match(out.errors[6], /^invalid-argument: topLogprobs must be/);
  assert.deepEqual(out.lp.fused.tokens, out.lp.unfused.tokens);
  assert.equal(out.lp.fused.logprobs.length, out.lp.fused.tokens.length);
  out.lp.fused.logprobs.forEach((a, i) => {
    const b = out.lp.unfused.logprobs[i];
    assert.equal(a.id, out.lp.fused.tokens[i]);
    assert.ok(Math.abs(a.logprob - b.logprob) <= 1e-3 && a.logprob <= 0, `step ${i}: ${a.logprob} vs ${b.logprob}`);
    assert.equal(a.topLogprobs.length, 3);
    assert.equal(a.topLogprobs[0].id, a.id);
    a.topLogprobs.forEach((t, j) => {
      assert.ok(Math.abs(t.logprob - b.topLogprobs[j].logprob) <= 1e-3, `step ${i} top ${j}`);
      if (j > 0) assert.ok(t.logprob <= a.topLogprobs[j - 1].logprob);
    });
  });
  const content = out.lp.chat.choices[0].logprobs.content;
  assert.equal(content.length, out.lp.chat.usage.completion_tokens);
  for (const c of content) {
    assert.equal(typeof c.token, "string");
    assert.ok(Array.isArray(c.bytes) && c.logprob <= 0 && c.top_logprobs.length === 2, JSON.stringify(c));
  }
  assert.equal(out.chat.choices[0].logprobs, null, "not asked: null");
  // Tool calls: the arguments follow the function's parameters (ajv).
  const params = { add: ajv.compile(add.function.parameters), echo: ajv.compile(echo.function.parameters) };
  const checkCall = (c, where) => {
    assert.equal(c.type, "function", where);
    assert.match(c.id, /^call_/, where);
    assert.ok(params[c.function.name], `${where}: ${c.function.name}`);
    assert.ok(params[c.function.name](JSON.parse(c.function.arguments)), `${where}: ${c.function.arguments}`);
  };
  const required = out.required.choices[0];
  assert.equal(required.finish_reason, "tool_calls", JSON.stringify(required));
  assert.equal(required.message.content, null);
  assert.equal(required.message.tool_calls.length, 1, "parallel_tool_calls: false");
  checkCall(required.message.tool_calls[0], "required");
  assert.match(out.errors[4], /^invalid-argument: .*tool_choice names nope/);
  assert.match(out.errors[5], /^invalid-argument: .*tools\[0\]\.function\.name/);
  assertNoProblems(problems);
});

test("tokenize and detokenize, also during a generation", async () => {
  const { page, problems } = await sharedPage();
  const out = await page.evaluate(async (url) => {
    const m = await window.f.loadModel(url, { nCtx: 64 });
    const g = m.generate("Hello", { maxTokens: 20 });
    const plain = await m.tokenize("Hi <|im_end|>");
    const special = await m.tokenize("Hi <|im_end|>", { addSpecial: true, parseSpecial: true });
    const text = await m.detokenize(plain);
    await g.result();
    await m.dispose();
    return { plain, special, text };
  }, model);
  assert.deepEqual(out.special, [72, 105, 32, 257], "control token recognised");
  assert.equal(out.plain.length, 13, "written out byte by byte");
  assert.equal(out.text, "Hi <|im_end|>");
  assertNoProblems(problems);
});

test("a second load compiles no kernels; after the GPU device is lost, generation says device-lost and a new load works", async () => {
  const { page, problems } = await sdkPage({
    init: () => {
      // Keep every device the page creates, so the test can destroy it like a driver reset.
      const request = GPUAdapter.prototype.requestDevice;
      window.__devices = [];
      GPUAdapter.prototype.requestDevice = async function (...args) {
        const device = await request.apply(this, args);
        window.__devices.push(device);
        return device;
      };
    },
  });
  const out = await page.evaluate(async (url) => {
    const t0 = performance.now();
    const first = await window.f.loadModel(url, { nCtx: 64 });
    const t1 = performance.now();
    const firstTokens = (await first.generate("Hello", { maxTokens: 5 }).result()).tokens;
    const compiled = [first.info.kernelsCompiled];
    await first.dispose();
    const t2 = performance.now();
    const m = await window.f.loadModel(url, { nCtx: 64 });
    const seconds = [(t1 - t0) / 1000, (performance.now() - t2) / 1000];
    const before = (await m.generate("Hello", { maxTokens: 5 }).result()).tokens;
    compiled.push(m.info.kernelsCompiled);
    const devices = window.__devices.length;
    window.__devices.at(-1).destroy();
    await window.__devices.at(-1).lost;
    const lost = await m.generate("Hello", { maxTokens: 5 }).result().then(() => "resolved", (e) => e.kind);
    await m.dispose();
    const again = await window.f.loadModel(url, { nCtx: 64 });
    const after = (await again.generate("Hello", { maxTokens: 5 }).result()).tokens;
    await again.dispose();
    return { firstTokens, compiled, seconds, devices, before, lost, after };
  }, model);
  console.log(`load: first ${out.seconds[0].toFixed(2)} s (${out.compiled[0]} kernels compiled), second ${out.seconds[1].toFixed(2)} s (${out.compiled[1]})`);
  assert.ok(out.compiled[0] > 0, `the first load compiles its kernels (${out.compiled[0]})`);
  assert.equal(out.compiled[1], 0, "the second load on the page's device compiles none");
  assert.equal(out.devices, 1, "both loads on one device");
  assert.deepEqual(out.before, out.firstTokens, "same tokens from both loads");
  assert.equal(out.lost, "device-lost");
  assert.deepEqual(out.after, out.before);
  assertNoProblems(problems);
});

test("several models share one device within a memoryBudget, estimated from the header; load/dispose cycles keep GPU memory flat", async () => {
  const { page, problems } = await sharedPage();
  const realSize = statSync(`${root}${realModel}`).size;
  const out = await page.evaluate(async ({ url, real }) => {
    const f = window.f;
    const failure = (e) => ({ name: e.name, kind: e.kind, limit: e.limit, needed: e.needed, available: e.available, message: e.message });
    // The real model's estimate reads its header only: count what the stream gave.
    let read = 0;
    const body = (await fetch(real)).body.pipeThrough(new TransformStream({ transform: (c, out) => { read += c.length; out.enqueue(c); } }));
    const realEstimate = await f.estimateMemory(body, { nCtx: 2048 });
    const estimate = await f.estimateMemory(url, { nCtx: 64 });
    const probed = (await f.probe({ model: url, nCtx: 64 })).memory;
    const idle = await f.memoryInUse();
    let parsed;
    const a = await f.loadModel(url, { nCtx: 64, onProgress: (p) => (p.phase === "parse" ? (parsed = p.memory) : undefined) });
    const aHeld = a.info.memory;
    const ids = async (m) => (await m.generate("Hello", { maxTokens: 4, strategy: "unfused" }).result()).tokens;
    const aIds = await ids(a);
    // Room for a second copy of the model, not a third.
    const memoryBudget = aHeld.total + estimate.total;
    const b = await f.loadModel(url, { nCtx: 64, memoryBudget });
    const inUse = await f.memoryInUse();
    const third = await f.loadModel(url, { nCtx: 64, memoryBudget }).then(() => "loaded", failure);
    const bIds = await ids(b);
    const aAgain = await ids(a);
    await a.dispose();
    const afterDispose = await f.memoryInUse();
    const c = await f.loadModel(url, { nCtx: 64, memoryBudget });
    const cIds = await ids(c);
    await b.dispose();
    await c.dispose();
    const baseline = window.__gpuBuffers();
    const cycles = [];
    for (let i = 0; i < 5; i++) {
      const m = await f.loadModel(url, { nCtx: 64 });
      await m.generate("Hi", { maxTokens: 1 }).result();
      await m.dispose();
      const now = window.__gpuBuffers();
      cycles.push([now.count, now.bytes]);
    }
    // Two loads at once within a budget for one: the second header sees the first's estimate.
    const racing = await Promise.allSettled([0, 1].map(() => f.loadModel(url, { nCtx: 64, memoryBudget: estimate.total })));
    const raced = racing.map((r) => (r.status === "fulfilled" ? "loaded" : failure(r.reason).limit));
    for (const r of racing) if (r.status === "fulfilled") await r.value.dispose();
    const afterRace = await f.memoryInUse();
    const bad = await f.loadModel(url, { memoryBudget: -1 }).then(() => "loaded", failure);
    const badEstimate = await f.estimateMemory(url, { nCtx: 0 }).then(() => "resolved", failure);
    return { read, realEstimate, estimate, probed, idle, parsed, aHeld, aIds, inUse, third, bIds, aAgain, afterDispose, cIds, baseline: [baseline.count, baseline.bytes], cycles, raced, afterRace, bad, badEstimate, memoryBudget };
  }, { url: model, real: `/${realModel}` });
  const mib = (n) => `${(n / 2 ** 20).toFixed(1)} MiB`;
  const r = out.realEstimate;
  console.log(`SmolLM2-135M Q4_1 at nCtx 2048, from ${out.read} of ${realSize} bytes: weights ${mib(r.weights)}, KV ${mib(r.kvCache)}, activations ${mib(r.activations)}, other ${mib(r.other)}, total ${mib(r.total)}`);
  assert.ok(out.read < 4 << 20, `the estimate read ${out.read} of ${realSize} bytes`);
  assert.equal(r.fileBytes, realSize);
  assert.equal(r.kvCache, 2 * 30 * 3 * 64 * 2048 * 4, "SmolLM2's f32 KV cache at nCtx 2048");
  assert.ok(r.weights > 0.8 * realSize && r.weights < 1.3 * realSize, `weights ${r.weights} for a ${realSize}-byte file`);
  assert.equal(out.idle, 0, "no model loaded yet");
  assert.deepEqual(out.probed, out.estimate, "probe({ model, nCtx }) gives estimateMemory's estimate");
  const { fileBytes, inUse, ...parts } = out.estimate;
  assert.equal(inUse, 0);
  assert.ok(fileBytes > 0);
  assert.deepEqual(out.parsed, parts, "loadModel's parse phase reports the same estimate");
  for (const k of ["weights", "kvCache", "activations"]) assert.equal(out.aHeld[k], parts[k], `${k}: estimated = held`);
  assert.ok(parts.total >= out.aHeld.total, `the estimate ${parts.total} covers the ${out.aHeld.total} held`);
  assert.equal(out.inUse, out.aHeld.total * 2, "two models held on the page");
  assert.equal(out.third.kind, "limit-exceeded", JSON.stringify(out.third));
  assert.equal(out.third.limit, "memoryBudget");
  assert.equal(out.third.needed, parts.total);
  assert.equal(out.third.available, out.memoryBudget - out.inUse);
  assert.match(out.third.message, /weights .* KV cache .* for nCtx 64.* held by the models already loaded/);
  assert.deepEqual(out.bIds, out.aIds, "the second model generates as the first");
  assert.deepEqual(out.aAgain, out.aIds, "the first is unchanged beside it");
  assert.equal(out.afterDispose, out.aHeld.total, "disposing one frees its share of the budget");
  assert.deepEqual(out.cIds, out.aIds, "a model loaded in the freed room");
  for (const [i, now] of out.cycles.entries()) assert.deepEqual(now, out.baseline, `load/dispose cycle ${i}: GPU buffers flat`);
  assert.deepEqual(out.raced.sort(), ["loaded", "memoryBudget"], "of two loads at once within a budget for one, one is refused");
  assert.equal(out.afterRace, 0, "nothing held or reserved once both ended");
  assert.equal(out.bad.kind, "invalid-argument");
  assert.match(out.bad.message, /^memoryBudget must be an integer ≥ 0, got -1$/);
  assert.equal(out.badEstimate.kind, "invalid-argument");
  assert.match(out.badEstimate.message, /nCtx/);
  assertNoProblems(problems);
});

test("worker mode: same API and ids, streaming and abort across the boundary, main thread free", async () => {
  const { page, problems } = await sharedPage();
  const out = await page.evaluate(async (url) => {
    const local = await window.f.loadModel(url, { nCtx: 256 });
    const expected = (await local.generate("Hello", { maxTokens: 24, temperature: 0.9, seed: 11 }).result()).tokens;
    await local.dispose();
    // Buffers the main thread creates from here on (the shared page's device made others before).
    const createdBefore = window.__gpuBuffers().created;
    const phases = new Set();
    const m = await window.f.loadModel(url, { worker: true, nCtx: 256, onProgress: (p) => phases.add(p.phase) });
    // The main thread stays free while the worker generates: no main-thread task of 250 ms or
    // more (the long-task API reports those over 50 ms) while it runs. A timer's longest gap was
    // the measure before; on a loaded 2-core CI host it also counted the renderer waiting for a
    // core between tasks (CI failed at 250 ms) and is only reported now. The observer must see
    // a deliberate 300 ms task first, so the check cannot pass in a browser that reports none.
    const longTasks = [];
    const observer = new PerformanceObserver((list) => longTasks.push(...list.getEntries().map((e) => e.duration)));
    observer.observe({ type: "longtask" });
    const busyUntil = performance.now() + 300;
    while (performance.now() < busyUntil);
    await new Promise((r) => setTimeout(r, 50));
    const probe = longTasks.splice(0);
    let gap = 0, last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      gap = Math.max(gap, now - last);
      last = now;
    }, 5);
    const g = m.generate("Hello", { maxTokens: 24, temperature: 0.9, seed: 11, chunkTokens: 4 });
    const chunks = [];
    for await (const c of g) chunks.push(c);
    clearInterval(timer);
    await new Promise((r) => setTimeout(r, 50));
    observer.disconnect();
    const during = longTasks.splice(0);
    const r = await g.result();
    const ac = new AbortController();
    const long = m.generate("Hello", { maxTokens: 200, chunkTokens: 2, signal: ac.signal });
    let abortKind, seen = 0;
    try {
      for await (const c of long) if (++seen === 1) ac.abort();
    } catch (e) {
      abortKind = e.kind;
    }
    const chat = await m.chat.completions.create({ messages: [{ role: "user", content: "Hi" }], max_tokens: 4 });
    const tokens = await m.tokenize("Hi");
    const prepared = await m.prepareResponseFormat({ type: "regex", pattern: "[0-9]{3}" });
    const mainThreadBuffers = window.__gpuBuffers().created - createdBefore;
    await m.dispose();
    const disposed = await m.generate("Hi").result().then(() => "resolved", (e) => e.kind);
    return { expected, phases: [...phases], chunks, r, gap, probe, during, abortKind, seen, chat, tokens, prepared, mainThreadBuffers, disposed };
  }, model);
  assert.deepEqual(out.r.tokens, out.expected, "the worker's seeded ids equal the main thread's");
  assert.deepEqual(out.phases, ["download", "parse", "upload", "compile"]);
  assert.ok(out.chunks.length >= 3, `${out.chunks.length} chunks`);
  assert.deepEqual(out.chunks.flatMap((c) => c.tokenIds), out.r.tokens);
  assert.equal(out.abortKind, "aborted");
  assert.equal(out.chat.object, "chat.completion");
  assert.deepEqual(out.tokens, [72, 105]);
  assert.ok(!out.prepared.cached && out.prepared.states > 0, `prepared in the worker: ${JSON.stringify(out.prepared)}`);
  assert.equal(out.mainThreadBuffers, 0, "no GPU buffer is created on the main thread in worker mode");
  assert.equal(out.disposed, "invalid-argument");
  assert.ok(out.probe.some((d) => d >= 300), `the long-task observer saw the deliberate 300 ms task: ${JSON.stringify(out.probe)}`);
  assert.ok(out.during.every((d) => d < 250), `main-thread tasks while the worker generates: ${JSON.stringify(out.during)} ms`);
  console.log(`worker mode: main-thread long tasks ${JSON.stringify(out.during)} ms; longest timer gap ${out.gap.toFixed(1)} ms (not asserted: it counts waiting for a core)`);
  assertNoProblems(problems);
});

test("calibration: the fastest strategy becomes the default, cached in localStorage, applied in worker mode", async () => {
  const { page, problems } = await sharedPage();
  const out = await page.evaluate(async (url) => {
    localStorage.clear();
    const kind = (e) => (e instanceof window.f.FuselmError ? e.kind : `untyped: ${e}`);
    const m = await window.f.loadModel(url, { nCtx: 64 });
    const greedy = async () => (await m.generate("Hi", { maxTokens: 6 }).result()).tokens;
    const before = { ids: await greedy(), strategy: m.info.strategy };
    const measured = await m.calibrate({ tokens: 4, runs: 1, cache: true });
    const info = { strategy: m.info.strategy, reason: m.info.strategyReason };
    const keys = Object.keys(localStorage);
    const cached = await m.calibrate({ tokens: 4, runs: 1, cache: true });
    const after = await greedy();
    // Typed errors, and the model stays usable.
    const rejected = [];
    rejected.push(await m.calibrate({ runs: 0 }).then(() => "resolved", kind));
    rejected.push(await m.useCalibration({ ...measured, key: "another model" }).then(() => "resolved", kind));
    rejected.push(await m.useCalibration("not a calibration").then(() => "resolved", kind));
    rejected.push(await m.calibrate({ cache: 42 }).then(() => "resolved", kind));
    const running = m.generate("Hi", { maxTokens: 30, chunkTokens: 2 });
    rejected.push(await m.calibrate({ tokens: 2, runs: 1 }).then(() => "resolved", kind));
    await running.result();
    // Your own store.
    const map = new Map();
    const store = { getItem: (k) => map.get(k) ?? null, setItem: (k, v) => map.set(k, v) };
    const own = await m.calibrate({ tokens: 4, runs: 1, cache: store });
    await m.dispose();
    // Worker mode: the page's cache applies to the model in the worker.
    const w = await window.f.loadModel(url, { worker: true, nCtx: 64 });
    const inWorker = await w.calibrate({ cache: true });
    const workerInfo = { strategy: w.info.strategy, reason: w.info.strategyReason };
    await w.dispose();
    return { before, measured, info, keys, cached, after, rejected, own, mapKeys: [...map.keys()], inWorker, workerInfo };
  }, model);
  const { measured } = out;
  assert.equal(measured.fromCache, false);
  assert.deepEqual([measured.promptTokens, measured.newTokens, measured.runs], [8, 4, 1]);
  assert.deepEqual(measured.results.map((r) => r.strategy).sort(), ["fused", "megakernel", "unfused"]);
  const tps = measured.results.map((r) => r.endToEndTokensPerSecond.median);
  assert.ok(tps.every((t, i) => t > 0 && (i === 0 || tps[i - 1] >= t)), `fastest first: ${tps}`);
  assert.equal(measured.strategy, measured.results[0].strategy);
  assert.deepEqual(out.info, { strategy: measured.strategy, reason: measured.reason });
  assert.match(measured.reason, /fastest in this device's calibration/);
  assert.deepEqual(out.keys, [`fuselm.calibration.v1:${measured.key}`]);
  assert.equal(out.cached.fromCache, true);
  assert.deepEqual({ ...out.cached, fromCache: false }, measured);
  assert.deepEqual(out.after, out.before.ids, "greedy ids do not depend on the strategy");
  assert.deepEqual(out.rejected, ["invalid-argument", "invalid-argument", "invalid-argument", "invalid-argument", "busy"]);
  assert.equal(out.own.fromCache, false);
  assert.deepEqual(out.mapKeys, [`fuselm.calibration.v1:${measured.key}`]);
  assert.equal(out.inWorker.fromCache, true);
  assert.deepEqual(out.workerInfo, { strategy: measured.strategy, reason: measured.reason });
  console.log(`calibration on SwiftShader: ${measured.reason} (the planner had picked ${out.before.strategy})`);
  assertNoProblems(problems);
});

test("loading the real model streams it: JS heap and wasm memory stay far below the file size", async () => {
  const { page, problems } = await sdkPage({
    init: () => {
      // The wasm instance's memory, to report its size.
      const instantiate = WebAssembly.instantiate;
      WebAssembly.instantiate = async function (...args) {
        const out = await instantiate.apply(this, args);
        window.__wasmMemory = (out.instance ?? out).exports.memory;
        return out;
      };
      const streaming = WebAssembly.instantiateStreaming;
      WebAssembly.instantiateStreaming = async function (...args) {
        const out = await streaming.apply(this, args);
        window.__wasmMemory = out.instance.exports.memory;
        return out;
      };
    },
  });
  const size = statSync(`${root}${realModel}`).size;
  const out = await page.evaluate(async (url) => {
    const heap = () => performance.memory.usedJSHeapSize;
    await window.f.init();
    const start = { heap: heap(), wasm: window.__wasmMemory.buffer.byteLength };
    let peakHeap = start.heap;
    const t0 = performance.now();
    const m = await window.f.loadModel(url, { nCtx: 256, onProgress: () => (peakHeap = Math.max(peakHeap, heap())) });
    const seconds = (performance.now() - t0) / 1000;
    // No generation: this test is the load's memory. That the streamed weights are the file's is
    // held by the chat page's exact-reference test (tests/site/chat.test.mjs: the same streaming
    // loadModel(url), greedy ids = the float64 reference). One token here cost 60-75 s of
    // SwiftShader beside the native lane (2026-11-29), two thirds of this test.
    const info = m.info;
    await m.dispose();
    return { start, peakHeap, wasm: window.__wasmMemory.buffer.byteLength, seconds, info };
  }, `/${realModel}`);
  const mb = (b) => (b / 2 ** 20).toFixed(1);
  console.log(
    `real model (${mb(size)} MB) loaded in ${out.seconds.toFixed(1)} s: JS heap ${mb(out.start.heap)} → peak ${mb(out.peakHeap)} MB ` +
      `(+${mb(out.peakHeap - out.start.heap)}), wasm memory ${mb(out.start.wasm)} → ${mb(out.wasm)} MB; GPU ${mb(out.info.memory.total)} MB`,
  );
  // The heap figure includes download chunks already handed to wasm and not yet collected
  // (garbage, reclaimed under pressure): it shows the file is never held, not a live set.
  assert.ok(out.peakHeap - out.start.heap < size, "the JS heap never holds the file");
  // wasm memory only grows (never shrinks): its final size is the load's peak. It holds the
  // tokenizer and header (~49k tokens and merges), one tensor at a time, allocator slack.
  assert.ok(out.wasm < size, `wasm memory ${out.wasm} bytes for a ${size}-byte file`);
  // SmolLM2-135M-Instruct.Q4_1.gguf: every layer matrix Q4_1, the (tied) embedding Q8_0.
  const matrices = Object.fromEntries(out.info.quantTypes.map((q) => [q.ggmlType, q.matrices]));
  assert.deepEqual(matrices, { Q4_1: 30 * 7, Q8_0: 1 });
  assert.ok(out.info.memory.weights > size * 0.9 && out.info.memory.weights < size * 1.1, JSON.stringify(out.info.memory));
  // SwiftShader is a software adapter: unfused by default, and the model says why.
  assert.equal(out.info.strategy, "unfused");
  assert.match(out.info.strategyReason, /software/);
  assert.equal(out.info.adapter, "swiftshader");
  assertNoProblems(problems);
});

test("simulation: GPU fitness matches the CPU reference, evolution learns CartPole, custom WGSL environments, typed errors", async () => {
  const { page, problems } = await sdkPage();
  const out = await page.evaluate(async () => {
    const { createSimulation, evaluatePopulation } = window.f;
    const population = 64;
    const sim = await createSimulation({ env: { name: "cart-pole" }, policy: { kind: "mlp", hidden: 8 }, population, episodeLength: 300, seed: 5 });
    const n = sim.info.parameters;
    const params = new Float32Array(population * n).map((_, i) => Math.sin(i * 12.9898) * 0.8);
    const fused = await sim.evaluate(params);
    const unfused = await sim.evaluate(params, { strategy: "unfused" });
    let agree = 0;
    for (let m = 0; m < population; m++) {
      const t = sim.trace(params.subarray(m * n, (m + 1) * n), { member: m });
      if (t.fitness.steps === fused.steps[m] && Math.abs(t.fitness.totalReward - fused.totalReward[m]) <= 1e-3 * Math.max(1, Math.abs(t.fitness.totalReward))) agree++;
    }
    const once = await evaluatePopulation({ env: { name: "cart-pole" }, policy: { kind: "mlp", hidden: 8 }, population, episodeLength: 300, seed: 5, params });
    // Evolution on the GPU, continued across calls from the returned mean.
    const es = await createSimulation({ env: { name: "cart-pole" }, population: 128, episodeLength: 200, seed: 5 });
    let theta = new Float32Array(es.info.parameters);
    const curve = [];
    for (let call = 0; call < 4; call++) {
      const r = await es.evolve(theta, { generations: 10, sigma: 0.5, learningRate: 0.3, seed: 7 + call });
      theta = r.theta;
      curve.push(...r.stats.map((s) => s.meanReward));
    }
    const best = es.trace(theta, { member: 3 });
    // A user environment: a point mass pushed towards the origin.
    const wgsl = `
fn env_init(seed: u32, member: u32) -> array<f32, STATE_LEN> {
    return array<f32, STATE_LEN>(sim_uniform(seed, member, 0u, -1.0, 1.0), 0.0);
}
fn env_observe(s: array<f32, STATE_LEN>) -> array<f32, OBS_LEN> { return s; }
fn env_step(s: array<f32, STATE_LEN>, action: f32) -> EnvStep {
    var out: EnvStep;
    let v = s[1] + 0.1 * action;
    out.s = array<f32, STATE_LEN>(s[0] + 0.1 * v, v);
    out.reward = -(out.s[0] * out.s[0]);
    out.terminated = abs(out.s[0]) > 2.0;
    return out;
}`;
    const custom = await evaluatePopulation({ env: { name: "custom", wgsl, stateSize: 2, observations: 2 }, population: 4, episodeLength: 50, params: [-1, -1, 0, 1, 1, 0, 0, 0, 0, -3, -2, 0] });
    const errors = {};
    const attempt = async (name, f) => {
      try {
        await f();
        errors[name] = "accepted";
      } catch (e) {
        errors[name] = `${e.name}/${e.kind}: ${e.message}`;
      }
    };
    await attempt("length", () => sim.evaluate(new Float32Array(3)));
    await attempt("compile", () => createSimulation({ env: { name: "custom", wgsl: wgsl.replace("return s;", "return s"), stateSize: 2, observations: 2 }, population: 4 }));
    await attempt("missing", () => createSimulation({ env: { name: "custom", wgsl: "fn env_init() {}", stateSize: 2, observations: 2 }, population: 4 }));
    await attempt("env", () => createSimulation({ env: { name: "pong" }, population: 4 }));
    await attempt("odd", async () => (await createSimulation({ env: { name: "cart-pole" }, population: 3 })).evolve(new Float32Array(10), { generations: 1 }));
    sim.free();
    await attempt("freed", () => sim.evaluate(params));
    const after = await es.evaluate(new Float32Array(128 * es.info.parameters));
    es.free();
    return {
      info: sim.info,
      agree,
      same: Array.from(fused.totalReward).every((r, m) => r === unfused.totalReward[m] && fused.steps[m] === unfused.steps[m]),
      onceSame: Array.from(once.totalReward).every((r, m) => r === fused.totalReward[m]),
      dispatches: [fused.dispatches, unfused.dispatches],
      types: [fused.totalReward.constructor.name, fused.steps.constructor.name],
      curve,
      bestSteps: best.fitness.steps,
      bestStates: best.states.length,
      custom: { reward: Array.from(custom.totalReward), steps: Array.from(custom.steps) },
      errors,
      after: after.steps.length,
    };
  });
  console.log(`# simulation: ${out.agree}/64 members agree with the CPU reference; ES mean reward ${out.curve[0].toFixed(1)} -> ${out.curve.at(-1).toFixed(1)}; custom ${JSON.stringify(out.custom)}`);
  assert.equal(out.info.parameters, 4 * 8 + 8 + 8 * 2 + 2);
  assert.ok(out.agree >= 61, `only ${out.agree} of 64 members agree with the CPU reference`);
  assert.ok(out.same, "fused and unfused differ");
  assert.ok(out.onceSame, "evaluatePopulation differs from Simulation.evaluate");
  assert.deepEqual(out.dispatches, [1, 300]);
  assert.deepEqual(out.types, ["Float32Array", "Uint32Array"]);
  assert.equal(out.curve.length, 40);
  assert.ok(out.curve.at(-1) > 2 * out.curve[0] && out.curve.at(-1) >= 60, `no learning: ${out.curve}`);
  assert.equal(out.bestStates, (out.bestSteps + 1) * 4);
  assert.equal(out.custom.steps[0], 50, "pushed towards the origin, member 0 stays on the track");
  assert.ok(out.custom.steps[1] < 50, "pushed away, member 1 leaves the track");
  assert.ok(out.custom.reward.every((r) => Number.isFinite(r) && r <= 0), JSON.stringify(out.custom));
  assert.match(out.errors.length, /^FuselmError\/invalid-argument: .*64 × 58 = 3712 floats, got 3/);
  assert.match(out.errors.compile, /^FuselmError\/invalid-argument: .*custom environment: the WGSL does not compile/);
  assert.match(out.errors.missing, /^FuselmError\/invalid-argument: .*env_observe is missing/);
  assert.match(out.errors.env, /^FuselmError\/invalid-argument: .*pong/);
  assert.match(out.errors.odd, /^FuselmError\/invalid-argument: .*ES needs an even population/);
  assert.match(out.errors.freed, /^FuselmError\/invalid-argument: .*this simulation was freed/);
  assert.equal(out.after, 128);
  assertNoProblems(problems);
});
