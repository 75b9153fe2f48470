// The chat page as a person uses it, in headless Chromium on SwiftShader: load a model, type,
// press send, watch the answer stream in, stop a long answer, go on talking; a local file; typed
// errors shown readably; the real SmolLM2 answering exactly as its float64 reference. Every test fails on a console error
// or an uncaught exception / unhandled rejection, and saves a screenshot (checked not blank) to
// target/site-screenshots/. Random-weight models talk gibberish but stream and stop like real ones:
// the tiny one (tiny-model.mjs), also as the local file (under another name).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { launch } from "./chromium.mjs";
import { writeTinyModel } from "./tiny-model.mjs";
import { liveBuffers, trackGpuBuffers } from "./gpu-buffers.mjs";
import {
  assertNoProblems, ensureTinyModel, expectState, openPage, realModel, root, screenshot, startServer,
  waitState,
} from "./page.mjs";

let server, base, localFile, tiny;
before(async () => {
  // The local file is the tiny model under its own name: the page keeps a conversation per model
  // name, and its kernels are the ones the tiny model's load from the URL then finds compiled on
  // the page's device. (The synthetic model was the local file until 2026-11-29: its load and
  // first generation compiled another model's kernels, 30 of the test's 62 s on SwiftShader.)
  localFile = `${root}target/site-test/local-tiny.gguf`;
  writeTinyModel(localFile);
  tiny = ensureTinyModel();
  ({ server, base } = await startServer());
});
after(() => server?.close());

const chatUrl = (query = "") => `${base}/examples/site/chat.html${query}`;
const lastAnswer = (page) => page.locator("#messages .msg.assistant").last();

/** Sets the sampling fields a test cares about, as a person would. */
async function settings(page, fields) {
  for (const [id, value] of Object.entries(fields)) await page.fill(`#${id}`, String(value));
}

/** Types a message and presses Enter; returns once the page took it (its user message is shown,
 * in the same step as the state leaves "ready": waiting for the state instead could miss a short
 * answer that is already done, as a clean-clone CI run of 11978f1 did). */
async function say(page, text) {
  const before = await page.locator("#messages .msg.user").count();
  await page.fill("#prompt", text);
  await page.press("#prompt", "Enter");
  await page.waitForFunction((n) => document.querySelectorAll("#messages .msg.user").length > n, before);
}

/**
 * Watches the last answer while the page generates, as a person reading along: its text length
 * every 50 ms until the page leaves "generating". Returns the distinct lengths seen meanwhile and
 * the final length.
 */
async function watchAnswer(page, timeout = 120_000) {
  const seen = [];
  const deadline = Date.now() + timeout;
  for (;;) {
    const { state, length } = await page.evaluate(() => ({
      state: document.body.dataset.state,
      length: [...document.querySelectorAll("#messages .msg.assistant .bubble")].at(-1)?.textContent.length ?? 0,
    }));
    if (state !== "generating") return { during: seen, final: length };
    if (length > 0 && seen.at(-1) !== length) seen.push(length);
    assert.ok(Date.now() < deadline, "the answer did not finish in time");
    await new Promise((ok) => setTimeout(ok, 50));
  }
}

async function loadByUrl(page, url, cache = "none") {
  await page.fill("#model-url", url);
  await page.selectOption("#cache", cache);
  await page.click("#load");
}

test("chat: load, stream an answer, stop a long one, keep talking, unload", async () => {
  // --expose-gc: the GPU memory of buffers that are dropped without destroy() is freed when their JS
  // objects are collected; the unload check collects first.
  const browser = await launch({ args: ["--js-flags=--expose-gc"] });
  try {
    const { page, problems } = await openPage(browser, chatUrl(), { init: trackGpuBuffers });
    assert.equal(await waitState(page, ["idle"]), "idle");
    assert.equal(await page.isDisabled("#send"), true, "nothing to send to before a model is loaded");
    const before = await liveBuffers(page);

    await loadByUrl(page, tiny);
    await expectState(page, "ready");
    const phases = (await page.evaluate(() => document.body.dataset.phases)).split(",");
    const order = ["download", "parse", "upload", "compile"];
    assert.ok(phases.includes("download") && phases.includes("upload"), `progress phases ${phases}`);
    assert.deepEqual(phases, [...phases].sort((a, b) => order.indexOf(a) - order.indexOf(b)), "phases in order");
    assert.match(await page.textContent("#model-info"), /tiny\.gguf/);
    assert.match(await page.textContent("#model-info"), /Q8_0 ×8/);
    assert.equal(await page.isHidden("#progress"), true, "the progress bar goes away once loaded");
    const loaded = await liveBuffers(page);
    assert.ok(loaded.bytes > before.bytes + 100_000, `the model's weights are on the GPU: ${JSON.stringify(loaded)}`);

    // First turn, with the model's default strategy (fused: tokens arrive 32 at a time): the
    // answer grows while it streams.
    await settings(page, { "max-tokens": 40, seed: 1, temperature: 0.7 });
    await say(page, "Hello there!");
    const { during, final } = await watchAnswer(page);
    const lengths = [...during, ...(final !== during.at(-1) ? [final] : [])];
    assert.deepEqual(lengths, [...lengths].sort((a, b) => a - b), "the answer only grows");
    await expectState(page, "ready");
    const first = lastAnswer(page);
    // Streamed: the page received the answer in several content chunks (counted by the page; a
    // 50 ms poll of the text can miss a short stream on a loaded machine).
    const pieces = Number(await first.getAttribute("data-pieces"));
    assert.ok(pieces >= 2, `the answer came in ${pieces} piece(s) (seen at lengths ${during} then ${final}): not streamed`);
    assert.match(await first.locator(".meta").textContent(), /\d+ tokens? · [\d.,]+ tok\/s · first token [\d.]+ s · prompt \d+ \(0 cached\)/);
    assert.ok((await first.locator(".bubble").textContent()).length > 0);

    // Second turn, a long answer with the unfused strategy (a token at a time, faster on a CPU
    // adapter): stop it while it streams.
    await page.selectOption("#strategy", "unfused");
    await settings(page, { "max-tokens": 300 });
    await say(page, "Tell me a long story.");
    await page.waitForFunction(
      () => ([...document.querySelectorAll("#messages .msg.assistant .bubble")].at(-1)?.textContent.length ?? 0) > 0,
      null, { timeout: 120_000 },
    );
    assert.equal(await page.evaluate(() => document.body.dataset.state), "generating", `still generating when stopped (${await page.textContent("#error")})`);
    await page.click("#stop");
    await expectState(page, "ready", 60_000);
    const stopped = lastAnswer(page);
    assert.equal(await stopped.getAttribute("data-finish"), "stopped");
    assert.match(await stopped.locator(".meta").textContent(), /stopped/);
    assert.match(await page.textContent("#status"), /Stopped/);
    const stoppedTokens = Number((await stopped.locator(".meta").textContent()).match(/(\d+) tokens?/)[1]);
    assert.ok(stoppedTokens < 300, `stopped after ${stoppedTokens} tokens`);

    // Third turn: the conversation goes on, and reuses the KV cache of the shared prefix.
    await settings(page, { "max-tokens": 12 });
    await say(page, "Thanks! And now something short.");
    await expectState(page, "ready");
    const third = lastAnswer(page);
    assert.ok((await third.locator(".bubble").textContent()).length > 0, "the turn after a stop is answered");
    const cached = Number((await third.locator(".meta").textContent()).match(/\((\d+) cached\)/)[1]);
    assert.ok(cached > 0, "the third turn reuses the cached prefix of the conversation");
    assert.equal(await page.locator("#messages .msg.user").count(), 3);
    assert.equal(await page.locator("#messages .msg.assistant").count(), 3);
    await screenshot(page, "chat-stream-stop");

    // A reload mid-conversation: loading the model again brings the conversation back with its
    // KV cache (a saved session in OPFS), so the next turn prefills only itself.
    await page.reload();
    assert.equal(await waitState(page, ["idle"]), "idle");
    await loadByUrl(page, tiny);
    await expectState(page, "ready");
    const restored = Number(await page.evaluate(() => document.body.dataset.restored));
    assert.ok(restored > 0, `the session came back (${restored} tokens)`);
    assert.match(await page.textContent("#status"), new RegExp(`conversation is back, with its ${restored}-token cache`));
    assert.equal(await page.locator("#messages .msg.user").count(), 3);
    assert.equal(await page.locator("#messages .msg.assistant").count(), 3);
    await settings(page, { "max-tokens": 4 });
    await say(page, "Still there?");
    await expectState(page, "ready");
    const resumed = Number((await lastAnswer(page).locator(".meta").textContent()).match(/\((\d+) cached\)/)[1]);
    assert.ok(resumed >= cached, `after the reload ${resumed} prompt tokens were cached (the third turn: ${cached})`);

    // New chat: an empty conversation, and the model answers without the old turns' cache.
    await page.click("#new-chat");
    assert.equal(await page.locator("#messages .msg").count(), 0);
    await settings(page, { "max-tokens": 4 });
    await say(page, "Hello again");
    await expectState(page, "ready");
    assert.match(await lastAnswer(page).locator(".meta").textContent(), /4 tokens .* prompt \d+ \(\d+ cached\)/);
    assert.equal(await page.locator("#messages .msg").count(), 2);
    // The session kept now is the new chat's: a reload would bring back this one turn only.
    assert.equal(await page.evaluate(() => JSON.parse(localStorage.getItem("fuselm-chat:tiny.gguf")).conversation.length), 2);

    // Unload frees the GPU memory.
    await page.click("#unload");
    await waitState(page, ["idle"]);
    const unloaded = await liveBuffers(page);
    assert.ok(unloaded.bytes <= before.bytes + 64 * 1024, `after unload ${JSON.stringify(unloaded)}, before load ${JSON.stringify(before)}`);
    assert.equal(await page.isDisabled("#send"), true);
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

test("chat: a conversation longer than the model's context goes on, with a note", async () => {
  const browser = await launch();
  try {
    const { page, problems } = await openPage(browser, chatUrl("?nCtx=64"));
    await loadByUrl(page, tiny);
    await expectState(page, "ready");
    assert.equal(await page.isHidden("#context-note"), true, "no note while the conversation fits");
    // Greedy, 20 tokens a turn: the third turn passes 64 tokens of context.
    await settings(page, { "max-tokens": 20, temperature: 0 });
    const dropped = [];
    for (const text of ["Hello there!", "Tell me more.", "And then?", "Go on, please.", "One more?"]) {
      await say(page, text);
      await expectState(page, "ready");
      const answer = lastAnswer(page);
      assert.notEqual(await answer.getAttribute("data-finish"), "error", await page.textContent("#error"));
      assert.ok((await answer.locator(".bubble").textContent()).length > 0, `"${text}" is answered`);
      dropped.push(await page.evaluate(() => [document.body.dataset.droppedTokens, document.body.dataset.droppedMessages].map(Number)));
    }
    assert.deepEqual(dropped[0], [0, 0], "the first turn fits");
    const [tokens, messages] = dropped.at(-1);
    assert.ok(tokens + messages > 0, `past nCtx the oldest context is dropped: ${JSON.stringify(dropped)}`);
    assert.equal(await page.isVisible("#context-note"), true, "the note says so");
    assert.match(await page.textContent("#context-note"), /longer than the model's context \(64 tokens\)/);
    // Every turn stays on the page.
    assert.equal(await page.locator("#messages .msg.user").count(), 5);
    assert.equal(await page.locator("#messages .msg.assistant").count(), 5);
    await screenshot(page, "chat-past-context");
    await page.click("#new-chat");
    assert.equal(await page.isHidden("#context-note"), true, "a new chat has no note");
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

test("chat: calibrate the strategy; the next visit applies the saved calibration", async () => {
  const browser = await launch();
  try {
    const { page, problems } = await openPage(browser, chatUrl());
    await page.evaluate(() => localStorage.clear());
    assert.equal(await waitState(page, ["idle"]), "idle");
    assert.equal(await page.isDisabled("#calibrate"), true, "nothing to calibrate before a model is loaded");
    await loadByUrl(page, tiny);
    await expectState(page, "ready");
    await page.click("#calibrate");
    await expectState(page, "ready", 180_000);
    const strategy = await page.evaluate(() => document.body.dataset.calibrated);
    assert.ok(["fused", "unfused", "megakernel"].includes(strategy), strategy);
    const status = await page.textContent("#status");
    assert.match(status, new RegExp(`^Calibrated: ${strategy} is the default now \\(${strategy} [\\d,]+ tok/s(, \\w+ [\\d,]+ tok/s)+\\)\\.$`));
    assert.match(await page.textContent("#model-info"), new RegExp(`${strategy}: fastest in this device's calibration`));
    assert.equal(await page.textContent("#strategy option[value='']"), `model default (${strategy})`);
    // Generations without a chosen strategy use it.
    await settings(page, { "max-tokens": 4, seed: 1 });
    await say(page, "Hi");
    await expectState(page, "ready");
    assert.match(await lastAnswer(page).locator(".meta").textContent(), new RegExp(` · ${strategy} · `));

    // A new visit: loading the same model and calibrating applies the saved result at once.
    await page.reload();
    assert.equal(await waitState(page, ["idle"]), "idle");
    await loadByUrl(page, tiny);
    await expectState(page, "ready");
    await page.click("#calibrate");
    await expectState(page, "ready", 60_000);
    assert.match(await page.textContent("#status"), new RegExp(`^Calibration from this browser's cache: ${strategy} is the default`));
    assert.equal(await page.evaluate(() => document.body.dataset.calibrated), strategy);
    await page.click("#unload");
    await waitState(page, ["idle"]);
    assert.equal(await page.evaluate(() => document.body.dataset.calibrated), undefined);
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

test("chat: a model from a local file, and the Cache API select", async () => {
  const browser = await launch();
  try {
    const { page, problems } = await openPage(browser, chatUrl());
    await page.setInputFiles("#model-file", localFile);
    await expectState(page, "ready");
    assert.match(await page.textContent("#model-info"), /local-tiny\.gguf/);
    // Unfused answers here and after the reload: the default (the megakernel) compiled its kernel
    // for each (~8 s of SwiftShader); the strategies are the other tests'.
    await page.selectOption("#strategy", "unfused");
    await settings(page, { "max-tokens": 4, seed: 3 });
    await say(page, "Hi from a file");
    await expectState(page, "ready");
    assert.ok((await lastAnswer(page).locator(".bubble").textContent()).length > 0);

    // With the Cache API, the second load of a URL comes from the cache.
    await loadByUrl(page, tiny, "cache-api");
    await expectState(page, "ready");
    await page.reload();
    await waitState(page, ["idle"]);
    await loadByUrl(page, tiny, "cache-api");
    await expectState(page, "ready");
    assert.equal(await page.evaluate(() => document.body.dataset.fromCache), "true", "loaded from the cache");
    await page.selectOption("#strategy", "unfused");
    await settings(page, { "max-tokens": 4 });
    await say(page, "Hi from the cache");
    await expectState(page, "ready");
    await screenshot(page, "chat-file");
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

test("chat: errors are shown with their kind, and the page recovers", async () => {
  const browser = await launch();
  try {
    // The missing file's 404 is logged by Chromium itself; nothing else may be.
    const { page, problems } = await openPage(browser, chatUrl(), { allow: [/status of 404/] });
    await loadByUrl(page, "/README.md");
    assert.equal(await waitState(page, ["error"]), "error");
    assert.equal(await page.evaluate(() => document.body.dataset.errorKind), "invalid-model");
    assert.match(await page.textContent("#error"), /Loading README\.md failed — invalid-model: \S/);
    assert.equal(await page.isDisabled("#send"), true);
    await screenshot(page, "chat-error");

    await loadByUrl(page, "/target/site-test/missing.gguf");
    await page.waitForFunction(() => document.body.dataset.errorKind && document.body.dataset.errorKind !== "invalid-model");
    const missing = await page.evaluate(() => document.body.dataset.errorKind);
    assert.ok(["network", "invalid-argument"].includes(missing), missing);
    assert.match(await page.textContent("#error"), new RegExp(`${missing}: \\S`));

    // Cancel a load (the real model is large enough to still be loading).
    if (existsSync(`${root}${realModel}`)) {
      await loadByUrl(page, `/${realModel}`);
      await page.waitForFunction(() => document.body.dataset.state === "loading" && document.body.dataset.phases);
      assert.equal(await page.isVisible("#progress-bar"), true, "a progress bar while loading");
      assert.match(await page.textContent("#progress-text"), /^(download|parse|upload|compile) /);
      await screenshot(page, "chat-loading");
      await page.click("#cancel-load");
      assert.equal(await waitState(page, ["idle", "ready", "error"], 120_000), "idle");
      assert.match(await page.textContent("#status"), /cancelled/);
    }

    // A good model after the errors: the page works. Unfused: the default (the megakernel)
    // compiled its kernel for this one answer (~8 s of SwiftShader); the strategies are the other
    // tests'.
    await loadByUrl(page, tiny);
    await expectState(page, "ready");
    assert.equal(await page.isHidden("#error"), true, "the error is cleared");
    await page.selectOption("#strategy", "unfused");
    await settings(page, { "max-tokens": 4 });
    await say(page, "Hello?");
    await expectState(page, "ready");
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

// The browser's share of the exact reference (the native tests hold every strategy to it on every
// model): the real SmolLM2-135M-Instruct, picked from the presets, answers one of its float64
// reference's chat prompts (tests/fixtures/exact/smollm2, prompt 3) with the reference's greedy
// ids. The rule (tests/fixtures/exact/smollm2's README): ids equal up to the first position whose
// reference margin is below 0.01; here capped at `smolTokens` (every margin among them is >= 0.6).
// The chat page streams text, so the answer is compared as text, detokenized by the page's model,
// and with the reference's own text. (Gemma 3 270M is held to its reference natively:
// tests/gemma3_reference.rs; its own kernels run in the browser in tests/kernels.rs.)
// Two: the fewest that stream (the first costs the prompt, ~70–85 s on SwiftShader beside the
// native lane; each further one ~15 s).
const smolTokens = 2;
const smolCase = "What is the boiling point of water?";

test("chat with the real SmolLM2-135M-Instruct: greedy answer = the float64 exact reference", { skip: !existsSync(`${root}${realModel}`) && "no models/ (scripts/fetch-model)" }, async () => {
  const cases = readFileSync(`${root}tests/fixtures/exact/smollm2/exact_greedy.jsonl`, "utf8")
    .split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  const ref = cases.find((c) => c.chat && c.prompt === smolCase);
  assert.ok(ref, "the prompt is in the exact reference");
  const low = ref.top2_margin.findIndex((m) => m < 0.01);
  const n = Math.min(smolTokens, low < 0 ? ref.greedy_ids.length : low);
  assert.equal(n, smolTokens, "the rule leaves every token to compare");
  const expectedIds = ref.greedy_ids.slice(0, n);

  const browser = await launch();
  const t0 = Date.now();
  try {
    const { page, problems } = await openPage(browser, chatUrl(`?model=/${realModel}&autoload`));
    await expectState(page, "ready", 300_000);
    const loaded = Date.now();
    const info = await page.textContent("#model-info");
    assert.match(info, /SmolLM2-135M-Instruct\.Q4_1\.gguf/);
    assert.equal(await page.inputValue("#preset"), `/${realModel}`, "?model= selects its preset");
    // The strategy it runs with is shown, with its reason (unfused: SwiftShader is a software adapter).
    const strategy = await page.evaluate(
      () => [...document.querySelectorAll("#model-info dt")].find((dt) => dt.textContent === "strategy")?.nextElementSibling?.textContent,
    );
    assert.match(strategy, /^unfused: \S/);
    assert.equal(await page.locator("#strategy option").first().textContent(), "model default (unfused)");

    await settings(page, { "max-tokens": n, temperature: 0 });
    await say(page, smolCase);
    const { during, final } = await watchAnswer(page, 300_000);
    await expectState(page, "ready");
    const answer = lastAnswer(page);
    const text = await answer.locator(".bubble").textContent();
    const meta = await answer.locator(".meta").textContent();
    // Streamed: the first token's text was shown while the second was computed.
    assert.ok(during.length >= 1 && during[0] < final, `the answer streamed in (lengths seen: ${during}, final ${final})`);
    assert.match(meta, new RegExp(`^${n} tokens · .* · prompt ${ref.prompt_ids.length} \\(0 cached\\) · unfused · max_tokens reached$`));
    assert.match(meta, /[\d.,]+ tok\/s/);

    const expected = await page.evaluate((ids) => window.fuselmChat.model.detokenize(ids), expectedIds);
    console.log(`SmolLM2 on SwiftShader: ${JSON.stringify(text)} — ${meta}; load ${((loaded - t0) / 1000).toFixed(0)} s, answer ${((Date.now() - loaded) / 1000).toFixed(0)} s`);
    assert.equal(text, expected, `the greedy answer vs the exact reference's first ${n} ids`);
    assert.ok(ref.text.startsWith(expected), `the reference's own text starts with ${JSON.stringify(expected)}`);
    // The page's tokenizer gives the reference's prompt ids for the rendered conversation.
    const promptIds = await page.evaluate((p) => window.fuselmChat.model.tokenize(p, { addSpecial: true, parseSpecial: true }), ref.rendered);
    assert.deepEqual(promptIds, ref.prompt_ids);
    await screenshot(page, "chat-smollm2");
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});
