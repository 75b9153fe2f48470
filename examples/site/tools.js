// The tool-calling page: the model may call two functions that this page answers itself, a
// calculator and a weather lookup (demo data; nothing leaves the page). One round, in OpenAI's
// shape: `chat.completions.create({ messages, tools, tool_choice, parallel_tool_calls, stream })`
// gives `tool_calls` (each call's arguments held on the GPU to its function's `parameters`); the
// page runs each call, appends the assistant's calls and a `role: "tool"` message per result, and
// asks again with `tool_choice: "none"` for the answer in words.
// Query parameters prefill the form: ?model=URL&question=TEXT&toolChoice=auto|none|required|
// calculate|get_weather&parallel=0|1&maxTokens=N&nCtx=N&strategy=S, and ?autorun asks on load.
// For tests: `document.body.dataset.state` ("idle" | "running" | "done" | "error") and
// `dataset.errorKind` (a FuselmError's kind, or "length").
// In your own site: `import { loadModel } from "fuselm"`.
import { loadModel } from "../../dist/index.js";
import { $, clearError, modelSlot, showError, showFailure } from "./ui.js";

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

/** This page's weather: °C and the sky, by lower-case city name. */
const WEATHER = {
  lisbon: [21, "sunny"],
  paris: [14, "cloudy"],
  tokyo: [18, "light rain"],
  "new york": [9, "windy"],
  "são paulo": [26, "thunderstorms"],
};

/** What the page runs for a call: its arguments (valid under the function's parameters) → result. */
const implementations = {
  calculate({ a, op, b }) {
    const expression = `${a} ${op} ${b}`;
    if (op === "/" && b === 0) return { expression, error: "division by zero" };
    return { expression, result: op === "+" ? a + b : op === "-" ? a - b : op === "*" ? a * b : a / b };
  },
  get_weather({ city, unit }) {
    const known = WEATHER[city.trim().toLowerCase()];
    if (!known) return { city, error: `no weather data for this city (this page knows ${Object.keys(WEATHER).join(", ")})` };
    const [celsius, sky] = known;
    return { city, temperature: unit === "fahrenheit" ? Math.round(celsius * 1.8 + 32) : celsius, unit, sky };
  },
};

$("tools").textContent = JSON.stringify(tools, null, 2);

const params = new URLSearchParams(location.search);
$("model").value = params.get("model") ?? "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
if (params.has("question")) $("question").value = params.get("question");
if (params.has("toolChoice")) $("tool-choice").value = params.get("toolChoice");
if (params.has("parallel")) $("parallel").checked = params.get("parallel") === "1";
if (params.has("maxTokens")) $("max-tokens").value = params.get("maxTokens");
if (params.has("nCtx")) $("n-ctx").value = params.get("nCtx");
if (params.has("strategy")) $("strategy").value = params.get("strategy");

const modelFor = modelSlot(loadModel);

/** The select's value as a request's `tool_choice`: a mode, or a named function. */
const toolChoice = (value) =>
  ["auto", "none", "required"].includes(value) ? value : { type: "function", function: { name: value } };

/** One streamed request: its words go to the answer as they come. Returns the words, the calls
 * (a streamed call comes whole, in one chunk), the finish reason and the usage. */
async function complete(model, request) {
  let content = "", finish, usage;
  const calls = [];
  for await (const chunk of await model.chat.completions.create(request)) {
    const { delta, finish_reason } = chunk.choices[0];
    if (delta.content) {
      content += delta.content;
      $("answer").textContent = content;
    }
    for (const { index, ...call } of delta.tool_calls ?? []) calls[index] = call;
    if (finish_reason) finish = finish_reason;
    if (chunk.usage) usage = chunk.usage;
  }
  return { content, calls, finish, usage };
}

function code(className, text) {
  const c = document.createElement("code");
  c.className = className;
  c.textContent = text;
  return c;
}

/** A call and what the page answered, as a list entry. */
function showCall(call, result) {
  const li = document.createElement("li");
  li.className = "call";
  li.dataset.name = call.function.name;
  li.dataset.id = call.id;
  const name = document.createElement("strong");
  name.textContent = call.function.name;
  const head = document.createElement("div");
  head.append(name, " ", code("args", call.function.arguments), " ", code("id muted", call.id));
  const answer = document.createElement("div");
  answer.append("→ ", code("result", result));
  li.append(head, answer);
  $("calls").append(li);
}

async function ask(event) {
  event?.preventDefault();
  clearError($("error"));
  $("calls").replaceChildren();
  $("no-calls").hidden = true;
  $("answer").textContent = "";
  $("finish").textContent = "";
  $("conversation").textContent = "";
  document.body.dataset.state = "running";
  $("ask").disabled = true;
  const maxTokens = Number($("max-tokens").value);
  const messages = [{ role: "user", content: $("question").value }];
  try {
    const model = await modelFor($("model").value, { nCtx: Number($("n-ctx").value) }, (url) => ($("status").textContent = `loading ${url}…`));
    const common = { stream: true, max_tokens: maxTokens, tools };
    if ($("strategy").value) common.strategy = $("strategy").value;
    $("status").textContent = "asking…";
    const first = await complete(model, {
      ...common,
      messages,
      tool_choice: toolChoice($("tool-choice").value),
      parallel_tool_calls: $("parallel").checked,
    });
    let answer = first;
    if (first.calls.length > 0) {
      messages.push({ role: "assistant", content: null, tool_calls: first.calls });
      for (const call of first.calls) {
        const run = implementations[call.function.name];
        const result = JSON.stringify(run(JSON.parse(call.function.arguments)));
        showCall(call, result);
        messages.push({ role: "tool", tool_call_id: call.id, content: result });
      }
      $("status").textContent = `ran ${first.calls.length} call${first.calls.length === 1 ? "" : "s"}; answering with the results…`;
      answer = await complete(model, { ...common, messages, tool_choice: "none" });
    } else if (first.finish === "length" && /^\s*[[{]/.test(first.content)) {
      // The JSON of a call that max tokens cut: no call to run.
      $("conversation").textContent = JSON.stringify([...messages, { role: "assistant", content: first.content }], null, 2);
      $("status").textContent = "";
      showFailure($("error"), "Tool call", "length", `the call was cut at max tokens (${maxTokens}) before it was complete; raise max tokens and try again.`);
      return;
    } else {
      $("no-calls").hidden = false;
    }
    messages.push({ role: "assistant", content: answer.content });
    $("conversation").textContent = JSON.stringify(messages, null, 2);
    const reasons = [first, ...(answer === first ? [] : [answer])].map((r) => `"${r.finish}"`).join(" then ");
    $("finish").textContent =
      `finish_reason ${reasons} · ${answer.usage.completion_tokens} tokens` +
      (answer.finish === "length" ? " (max tokens reached)" : "");
    document.body.dataset.state = "done";
    $("status").textContent = first.calls.length > 0 ? "answered with the tools' results." : "answered without a tool.";
  } catch (e) {
    $("status").textContent = "";
    showError($("error"), e, "Asking");
  } finally {
    $("ask").disabled = false;
  }
}

$("request").addEventListener("submit", ask);
if (params.has("autorun")) ask();
