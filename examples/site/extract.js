// The extraction page: paste a message, and the model fills a booking form from it. The answer is
// held to the form's JSON Schema on the GPU through OpenAI's `response_format: { type:
// "json_schema", json_schema: { name, schema, strict: true } }`, so a complete answer parses and
// validates; one cut by max tokens (`finish_reason: "length"`) is incomplete and shown as an error.
// The raw JSON streams in as the model writes it.
// Query parameters prefill the form: ?model=URL&text=MESSAGE&maxTokens=N&strategy=S, and ?autorun
// extracts on load. For tests: `document.body.dataset.state` ("idle" | "running" | "done" |
// "error") and `dataset.errorKind` (a FuselmError's kind, or "length").
// In your own site: `import { loadModel } from "fuselm"`.
import { loadModel } from "../../dist/index.js";
import { $, clearError, fmtNumber, modelSlot, showError, showFailure } from "./ui.js";

const DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/** The form as a JSON Schema: one property per field (`#field-<name>`), every one required. The
 * email is a pattern rather than `format: "email"` to bound its length: the format allows about
 * 250 characters, and a model that never closes a string writes all of them. */
const schema = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 32 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    email: { type: "string", pattern: "^[A-Za-z0-9._%+-]{1,20}@[A-Za-z0-9-]{1,20}\\.[A-Za-z]{2,6}$" },
    tickets: { type: "integer", minimum: 1, maximum: 10 },
    day: { enum: DAYS },
  },
  required: ["name", "age", "email", "tickets", "day"],
  additionalProperties: false,
};
const fields = Object.keys(schema.properties);

const system =
  "Extract the booking request in the user's message as JSON: the person's name, age and email, " +
  "how many tickets they want, and the day of the week.";

$("field-day").append(...DAYS.map((d) => new Option(d, d)));
$("schema").textContent = JSON.stringify(schema, null, 2);

const params = new URLSearchParams(location.search);
$("model").value = params.get("model") ?? "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
if (params.has("text")) $("text").value = params.get("text");
if (params.has("maxTokens")) $("max-tokens").value = params.get("maxTokens");
if (params.has("strategy")) $("strategy").value = params.get("strategy");

const modelFor = modelSlot(loadModel);

/** Empties the form, so a failed extraction never leaves the previous answer's values. */
function clearForm() {
  for (const f of fields) {
    $(`field-${f}`).value = "";
    $(`field-${f}`).classList.remove("filled");
  }
}

async function run(event) {
  event?.preventDefault();
  clearError($("error"));
  clearForm();
  $("raw").textContent = "";
  $("finish").textContent = "";
  document.body.dataset.state = "running";
  $("extract").disabled = true;
  const maxTokens = Number($("max-tokens").value);
  try {
    const model = await modelFor($("model").value, {}, (url) => ($("status").textContent = `loading ${url}…`));
    $("status").textContent = "extracting…";
    const request = {
      messages: [{ role: "system", content: system }, { role: "user", content: $("text").value }],
      stream: true,
      max_tokens: maxTokens,
      response_format: { type: "json_schema", json_schema: { name: "booking", schema, strict: true } },
    };
    if ($("strategy").value) request.strategy = $("strategy").value;
    const t0 = performance.now();
    let text = "", finish, usage;
    for await (const chunk of await model.chat.completions.create(request)) {
      const choice = chunk.choices[0];
      if (choice.delta.content) {
        text += choice.delta.content;
        $("raw").textContent = text;
      }
      if (choice.finish_reason) finish = choice.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    const seconds = (performance.now() - t0) / 1000;
    $("finish").textContent =
      `finish_reason "${finish}" · ${usage.completion_tokens} tokens in ${seconds.toFixed(1)} s ` +
      `(${fmtNumber(usage.extra.decode_tokens_per_s)} tok/s)${request.strategy ? ` · ${request.strategy}` : ""}`;
    if (finish === "length") {
      $("status").textContent = "";
      showFailure(
        $("error"), "Extraction", "length",
        `the answer was cut at max tokens (${maxTokens}) before its JSON was complete; raise max tokens and try again.`,
      );
      return;
    }
    // Complete, so valid under the schema: every field is there with a value it accepts.
    const booking = JSON.parse(text);
    for (const f of fields) {
      $(`field-${f}`).value = String(booking[f]);
      $(`field-${f}`).classList.add("filled");
    }
    document.body.dataset.state = "done";
    $("status").textContent = `filled ${fields.length} fields from ${usage.completion_tokens} tokens.`;
  } catch (e) {
    $("status").textContent = "";
    showError($("error"), e, "Extraction");
  } finally {
    $("extract").disabled = false;
  }
}

$("request").addEventListener("submit", run);
if (params.has("autorun")) run();
