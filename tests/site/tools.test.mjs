// The tool-calling page as a person uses it, in headless Chromium on SwiftShader: pick a
// tool_choice, ask, read the calls, what the page answered and the final answer. The tiny
// random-weight model (tiny-model.mjs) chooses nonsense, so the test holds the page to what the
// constraint and the page guarantee: every call's arguments parse and validate under its
// function's parameters (ajv, not fuselm); a named function is the only one called; the page ran
// each call (the result it shows is what this test computes from the arguments) and sent it back
// as a `role: "tool"` message with the call's id; "none" makes no call. Fails on a console error
// or an uncaught exception / unhandled rejection.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Ajv2020 from "ajv/dist/2020.js";
import { launch } from "./chromium.mjs";
import { assertNoProblems, ensureTinyModel, expectState, openPage, screenshot, startServer } from "./page.mjs";

// The page's tools, written out again: the test checks the page shows these, then validates with
// them.
const tools = [
  {
    type: "function",
    function: {
      name: "calculate",
      description: "Computes a op b for two numbers",
      parameters: {
        type: "object",
        properties: {
          a: { type: "number", minimum: -1000000, maximum: 1000000 },
          op: { enum: ["+", "-", "*", "/"] },
          b: { type: "number", minimum: -1000000, maximum: 1000000 },
        },
        required: ["a", "op", "b"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Today's weather in a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string", minLength: 1, maxLength: 32 }, unit: { enum: ["celsius", "fahrenheit"] } },
        required: ["city", "unit"],
        additionalProperties: false,
      },
    },
  },
];
const ajv = new Ajv2020({ strict: true });
const valid = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

/** What the page must have answered for a call, computed here from its arguments. */
function checkResult(name, args, result) {
  if (name === "calculate") {
    const expression = `${args.a} ${args.op} ${args.b}`;
    if (args.op === "/" && args.b === 0) return assert.deepEqual(result, { expression, error: "division by zero" });
    const value = { "+": args.a + args.b, "-": args.a - args.b, "*": args.a * args.b, "/": args.a / args.b }[args.op];
    return assert.deepEqual(result, { expression, result: value });
  }
  assert.equal(result.city, args.city, "get_weather answers for the city asked");
  if (result.error === undefined) {
    assert.equal(result.unit, args.unit);
    assert.equal(typeof result.temperature, "number");
  } else assert.match(result.error, /^no weather data for this city/);
}

let server, base, tiny;
before(async () => {
  tiny = ensureTinyModel();
  ({ server, base } = await startServer());
});
after(() => server?.close());

/** Picks `choice` in the select, asks, and waits for the answer; returns what the page shows. */
async function ask(page, choice) {
  await page.selectOption("#tool-choice", choice);
  await page.click("#ask");
  await expectState(page, "done");
  const calls = await page.$$eval("#calls li.call", (lis) =>
    lis.map((li) => ({
      name: li.dataset.name,
      id: li.dataset.id,
      args: li.querySelector(".args").textContent,
      result: li.querySelector(".result").textContent,
    })),
  );
  return {
    calls,
    answer: await page.textContent("#answer"),
    finish: await page.textContent("#finish"),
    conversation: JSON.parse(await page.textContent("#conversation")),
    noCalls: await page.isVisible("#no-calls"),
  };
}

/** Each call validates, was run, and went back to the model as the conversation's tool turns. */
function checkCalls(shown, question, names) {
  assert.ok(shown.calls.length >= 1, "at least one call");
  assert.equal(shown.noCalls, false);
  for (const c of shown.calls) {
    assert.ok(names.includes(c.name), `called ${c.name}, allowed ${names}`);
    const args = JSON.parse(c.args);
    assert.ok(valid[c.name](args), `${c.name}(${c.args}): ${JSON.stringify(valid[c.name].errors)}`);
    checkResult(c.name, args, JSON.parse(c.result));
  }
  const [user, assistant, ...rest] = shown.conversation;
  assert.deepEqual(user, { role: "user", content: question });
  assert.deepEqual(
    assistant.tool_calls.map((c) => ({ id: c.id, name: c.function.name, args: c.function.arguments })),
    shown.calls.map((c) => ({ id: c.id, name: c.name, args: c.args })),
    "the assistant turn holds the calls shown",
  );
  const toolTurns = rest.slice(0, -1);
  assert.deepEqual(toolTurns, shown.calls.map((c) => ({ role: "tool", tool_call_id: c.id, content: c.result })), "one tool turn per call, with its result");
  assert.deepEqual(rest.at(-1), { role: "assistant", content: shown.answer }, "the final answer is the last turn");
  assert.match(shown.finish, /^finish_reason "tool_calls" then "(stop|length)" · \d+ tokens/);
}

test("tools: a named function, required and none; each call validated, run by the page and sent back", async () => {
  const browser = await launch();
  try {
    const { page, problems } = await openPage(browser, `${base}/examples/site/tools.html?model=${encodeURIComponent(tiny)}`);
    assert.equal(await page.evaluate(() => document.body.dataset.state), "idle");
    assert.deepEqual(JSON.parse(await page.textContent("#tools")), tools, "the page's tools");
    const question = "What is 12.5 * 4? And what is the weather in Lisbon?";
    await page.fill("#question", question);
    // A call is about 120 tokens on random weights (strings run to their maxLength); the answer in
    // words after it runs to max tokens.
    await page.fill("#max-tokens", "150");

    const named = await ask(page, "calculate");
    checkCalls(named, question, ["calculate"]);
    await screenshot(page, "tools-named");

    const required = await ask(page, "required");
    checkCalls(required, question, ["calculate", "get_weather"]);

    const none = await ask(page, "none");
    assert.deepEqual(none.calls, []);
    assert.equal(none.noCalls, true, "the page says no tool was called");
    assert.match(none.finish, /^finish_reason "(stop|length)" · \d+ tokens/);
    assert.deepEqual(none.conversation, [{ role: "user", content: question }, { role: "assistant", content: none.answer }]);
    await screenshot(page, "tools-none");
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});
