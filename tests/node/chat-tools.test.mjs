// Tool calling's TypeScript half (dist/chat.js, dist/tools.js) in Node, over a scripted
// generation instead of a model: what the model is told and held to (system message, response
// format), how answers become `tool_calls` (whole or streamed, one or parallel, words with "auto",
// cut by the length), later turns, and typed errors. The GPU half — the call format compiled and
// followed by a real model — is tests/sdk's structured-output test in Chromium.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const { chatCompletions } = await import(pathToFileURL(join(root, "dist/chat.js")).href);
const { FuselmError } = await import(pathToFileURL(join(root, "dist/errors.js")).href);

const add = {
  type: "function",
  function: {
    name: "add",
    description: "Adds two digits",
    parameters: { type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } }, required: ["a", "b"] },
  },
};
const echo = { type: "function", function: { name: "echo", parameters: { type: "object", properties: { s: { type: "string" } } } } };
const messages = [{ role: "user", content: "What is 1 + 2?" }];

/** chat.completions over a generation that streams `pieces` and ends with `stopReason`. */
function scripted(pieces, stopReason = "end-of-generation") {
  const calls = [];
  const run = (msgs, options) => {
    calls.push({ messages: msgs, options });
    const text = pieces.join("");
    const result = {
      text,
      promptTokens: [1, 2, 3],
      tokens: pieces.map((_, i) => i),
      stopReason,
      reusedPromptTokens: 0,
      timings: { prefillSeconds: 0.1, decodeSeconds: 0.2, promptTokensPerSecond: 30, decodeTokensPerSecond: 10, recordSeconds: 0, constraintSeconds: 0 },
    };
    return {
      async *[Symbol.asyncIterator]() {
        for (const [i, p] of pieces.entries()) yield { text: p, tokenIds: [i] };
      },
      result: async () => result,
    };
  };
  return { completions: chatCompletions(run, () => "scripted"), calls };
}

test("tools: the model is told the functions and held to a call; the answer comes back as tool_calls", async () => {
  const { completions, calls } = scripted(['{"name": "add", ', '"arguments": {"a": 1, "b": 2}}']);
  const r = await completions.create({ messages, tools: [add, echo], tool_choice: "required" });
  const [{ messages: sent, options }] = calls;
  assert.equal(sent[0].role, "system");
  assert.match(sent[0].content, /- add: Adds two digits\. Arguments \(JSON Schema\): \{"type":"object"/);
  assert.match(sent[0].content, /reply with only the JSON object \{"name": <function name>, "arguments": <arguments object>\}; to call several, a JSON array/);
  assert.doesNotMatch(sent[0].content, /answer in words/, "required: no words");
  assert.deepEqual(sent.slice(1), messages);
  const f = options.responseFormat;
  assert.equal(f.type, "json_schema");
  assert.equal(f.orText, false);
  const one = f.schema.anyOf[0];
  assert.deepEqual(one.anyOf.map((c) => c.properties.name), [{ const: "add" }, { const: "echo" }]);
  assert.deepEqual(one.anyOf[0].properties.arguments, add.function.parameters);
  assert.deepEqual(f.schema.anyOf[1], { type: "array", items: one, minItems: 1, maxItems: 8 });
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.content, null);
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.match(call.id, /^call_/);
  assert.deepEqual({ type: call.type, name: call.function.name, args: JSON.parse(call.function.arguments) }, { type: "function", name: "add", args: { a: 1, b: 2 } });
});

test("parameters with $defs and $ref keep their references in the combined format", async () => {
  const place = {
    type: "function",
    function: {
      name: "book",
      parameters: {
        type: "object",
        properties: { from: { $ref: "#/$defs/City" }, to: { $ref: "#/definitions/City" }, via: { type: "array", items: { $ref: "#" } } },
        required: ["from", "to"],
        $defs: { City: { enum: ["Paris", "Rome"] } },
        definitions: { City: { enum: ["Paris", "Rome"] } },
      },
    },
  };
  const { completions, calls } = scripted(['{"name":"book","arguments":{"from":"Paris","to":"Rome"}}']);
  await completions.create({ messages, tools: [place, add], tool_choice: "required" });
  const f = calls[0].options.responseFormat;
  assert.equal(f.maxDepth, 8, "the call format's three levels come on top of the default 5");
  const args = f.schema.anyOf[0].anyOf[0].properties.arguments;
  assert.deepEqual(args.properties.from, { $ref: "#/$defs/book.City" });
  assert.deepEqual(args.properties.to, { $ref: "#/$defs/book.City" });
  assert.deepEqual(args.properties.via.items, { $ref: "#/$defs/book" });
  assert.deepEqual(f.schema.$defs["book.City"], { enum: ["Paris", "Rome"] });
  assert.deepEqual(f.schema.$defs.book, args);
  assert.equal(args.$defs, undefined);
  const bad = { type: "function", function: { name: "x", parameters: { $ref: "https://example.com/s.json" } } };
  await assert.rejects(scripted(["{}"]).completions.create({ messages, tools: [bad], tool_choice: "required" }), /must point into the parameters' \$defs/);
});

test("auto: words stay content; parallel calls; a named function; none", async () => {
  const words = scripted(["It is ", "3."]);
  const r = await words.completions.create({ messages, tools: [add] });
  assert.equal(words.calls[0].options.responseFormat.orText, true, "auto: a call or words");
  assert.match(words.calls[0].messages[0].content, /If no function is needed, answer in words\./);
  assert.deepEqual(r.choices[0].message, { role: "assistant", content: "It is 3." });
  assert.equal(r.choices[0].finish_reason, "stop");

  const two = scripted(['[{"name":"add","arguments":{"a":1,"b":2}},', '{"name":"echo","arguments":{"s":"hi"}}]']);
  const p = await two.completions.create({ messages: [{ role: "system", content: "Be brief." }, ...messages], tools: [add, echo] });
  assert.deepEqual(p.choices[0].message.tool_calls.map((c) => c.function.name), ["add", "echo"]);
  assert.match(two.calls[0].messages[0].content, /^Be brief\.\n\nYou can call these functions:/, "appended to the system message");
  assert.equal(two.calls[0].messages.length, 2);

  const named = scripted(['{"name":"echo","arguments":{"s":"x"}}']);
  await named.completions.create({ messages, tools: [add, echo], tool_choice: { type: "function", function: { name: "echo" } }, parallel_tool_calls: false });
  const f = named.calls[0].options.responseFormat;
  assert.equal(f.schema.properties.name.const, "echo", "only the named function, no array");
  assert.doesNotMatch(named.calls[0].messages[0].content, /add/);

  const none = scripted(["Sure."]);
  const n = await none.completions.create({ messages, tools: [add], tool_choice: "none" });
  assert.equal(none.calls[0].options.responseFormat, undefined);
  assert.deepEqual(none.calls[0].messages, messages);
  assert.equal(n.choices[0].message.content, "Sure.");
});

test("streaming: a call is one tool_calls chunk, never content; words stream as content", async () => {
  const collect = async (pieces, request) => {
    const { completions } = scripted(pieces);
    const chunks = [];
    for await (const c of await completions.create({ messages, tools: [add, echo], stream: true, ...request })) chunks.push(c);
    return chunks;
  };
  const call = await collect(['  [{"name":"add",', '"arguments":{"a":1,"b":2}},{"name":"echo","arguments":{}}]']);
  assert.deepEqual(call[0].choices[0].delta, { role: "assistant", content: "" });
  assert.deepEqual(call.flatMap((c) => c.choices[0].delta.content ?? []), [""]);
  const deltas = call.flatMap((c) => c.choices[0].delta.tool_calls ?? []);
  assert.deepEqual(deltas.map((d) => [d.index, d.function.name]), [[0, "add"], [1, "echo"]]);
  assert.equal(call.at(-1).choices[0].finish_reason, "tool_calls");
  assert.equal(call.at(-1).usage.completion_tokens, 2);

  const words = await collect([" ", "It", " is 3."]);
  assert.deepEqual(words.map((c) => c.choices[0].delta.content ?? null), ["", " It", " is 3.", null]);
  assert.equal(words.at(-1).choices[0].finish_reason, "stop");

  // Cut by the length inside the JSON: no call, the partial text as content.
  const { completions } = scripted(['{"name":"add","argu'], "length");
  const chunks = [];
  for await (const c of await completions.create({ messages, tools: [add], stream: true })) chunks.push(c);
  assert.equal(chunks.at(-1).choices[0].finish_reason, "length");
  assert.equal(chunks.map((c) => c.choices[0].delta.content ?? "").join(""), '{"name":"add","argu');
  const whole = await scripted(['{"name":"add","argu'], "length").completions.create({ messages, tools: [add] });
  assert.deepEqual(whole.choices[0], { index: 0, message: { role: "assistant", content: '{"name":"add","argu' }, finish_reason: "length", logprobs: null });
});

test("later turns: the assistant's calls and the tools' results go to the template", async () => {
  const { completions, calls } = scripted(["It is 3."]);
  const call = { id: "call_1", type: "function", function: { name: "add", arguments: '{"a":1,"b":2}' } };
  await completions.create({
    messages: [...messages, { role: "assistant", content: null, tool_calls: [call] }, { role: "tool", tool_call_id: "call_1", content: "3" }],
    tools: [add],
  });
  const sent = calls[0].messages;
  assert.deepEqual(sent.slice(1), [
    messages[0],
    { role: "assistant", content: '{"name":"add","arguments":{"a":1,"b":2}}' },
    { role: "tool", content: "3" },
  ]);
});

test("bad tools and messages are typed errors naming the field", async () => {
  const { completions } = scripted(["x"]);
  const kind = (p) => p.then(() => "resolved", (e) => (e instanceof FuselmError ? `${e.kind}: ${e.message}` : `untyped: ${e}`));
  const cases = [
    [{ messages, tool_choice: "required" }, /tool_choice needs tools/],
    [{ messages, tools: [] }, /tools must be a non-empty array/],
    [{ messages, tools: [{ type: "function", function: { name: "a b" } }] }, /tools\[0\]\.function\.name must be/],
    [{ messages, tools: [add, add] }, /tools\[1\]\.function\.name add is not unique/],
    [{ messages, tools: [add], tool_choice: { type: "function", function: { name: "sub" } } }, /tool_choice names sub/],
    [{ messages, tools: [add], tool_choice: "sometimes" }, /tool_choice must be/],
    [{ messages, tools: [add], response_format: { type: "json_object" } }, /cannot be combined/],
    [{ messages, tools: [add], parallel_tool_calls: "yes" }, /parallel_tool_calls must be a boolean/],
    [{ messages: [{ role: "tool", content: "3" }] }, /messages\[0\] must be \{ role: "tool", tool_call_id/],
    [{ messages: [{ role: "assistant", content: null, tool_calls: [{ function: { name: "add", arguments: "{" } }] }] }, /messages\[0\]\.tool_calls/],
  ];
  for (const [request, message] of cases) {
    const got = await kind(completions.create(request));
    assert.match(got, /^invalid-argument: /, JSON.stringify(request));
    assert.match(got, message, JSON.stringify(request));
  }
});
