// The generation page: load a GGUF model from a URL, generate (greedy at temperature 0, else
// sampled with top-k and a seed) with the fused or unfused strategy, show text, ids and timings.
// Query parameters prefill the form: ?model=URL&prompt=TEXT&maxTokens=N&chat=0|1&strategy=S
// &temperature=T&topK=K&seed=N, and ?autorun generates on load (what tests/site uses).
// In your own site: `import { loadModel } from "fuselm"`.
import { loadModel } from "../../dist/index.js";
import { $, errorKind, errorText, fmtBytes, rows } from "./ui.js";

const params = new URLSearchParams(location.search);
$("model").value = params.get("model") ?? "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
if (params.has("prompt")) $("prompt").value = params.get("prompt");
if (params.has("maxTokens")) $("max-tokens").value = params.get("maxTokens");
if (params.has("strategy")) $("strategy").value = params.get("strategy");
if (params.has("temperature")) $("temperature").value = params.get("temperature");
if (params.has("topK")) $("top-k").value = params.get("topK");
if (params.has("seed")) $("seed").value = params.get("seed");
// A test passing a prompt wants it verbatim unless it asks for the chat template.
if (params.has("chat") || params.has("prompt")) $("chat").checked = params.get("chat") === "1";

// The model stays loaded between clicks while its URL does not change.
let loaded; // { url, model }

async function modelFor(url) {
  if (loaded?.url === url) return loaded.model;
  const old = loaded?.model;
  loaded = undefined;
  await old?.dispose();
  $("status").textContent = `loading ${url}…`;
  const model = await loadModel(url);
  loaded = { url, model };
  return model;
}

async function run(event) {
  event?.preventDefault();
  document.body.dataset.state = "running";
  delete document.body.dataset.errorKind;
  $("generate").disabled = true;
  try {
    const model = await modelFor($("model").value);
    const info = model.info;
    rows($("info"), [
      ["architecture", info.architecture], ["layers", info.layers],
      ["embedding / feed-forward", `${info.embeddingLength} / ${info.feedForwardLength}`],
      ["heads (kv)", `${info.heads} (${info.kvHeads})`], ["vocabulary", info.vocabSize],
      ["context (trained / loaded nCtx)", `${info.contextLength} / ${info.nCtx}`], ["tied output", info.tiedOutput],
      ["weights", info.quantTypes.map((q) => `${q.ggmlType} ×${q.matrices}`).join(", ")],
      ["GPU memory", fmtBytes(info.memory.total)], ["adapter", info.adapter || "–"],
      ["default strategy", info.strategyReason.startsWith(info.strategy) ? info.strategyReason : `${info.strategy}: ${info.strategyReason}`],
    ]);
    $("status").textContent = "generating…";
    const temperature = Number($("temperature").value);
    const options = {
      chat: $("chat").checked,
      maxTokens: Number($("max-tokens").value),
      strategy: $("strategy").value,
      temperature,
    };
    // top-k and the seed only matter when sampling.
    if (temperature > 0) Object.assign(options, { topK: Number($("top-k").value), seed: Number($("seed").value) });
    // The text streams in; the result has the ids and timings.
    const generation = model.generate($("prompt").value, options);
    let streamed = "";
    for await (const chunk of generation) {
      streamed += chunk.text;
      $("text").textContent = streamed;
      $("output").hidden = false;
    }
    const result = await generation.result();
    const t = result.timings;
    $("text").textContent = result.text;
    $("tokens").textContent = result.tokens.join(" ");
    rows($("stats"), [
      ["strategy", options.strategy],
      ["sampling", temperature > 0 ? `temperature ${temperature}, top-k ${options.topK}, seed ${options.seed}` : "greedy"],
      ["stop reason", result.stopReason],
      ["prompt tokens", result.promptTokens.length], ["generated tokens", result.tokens.length],
      ["prefill", `${t.prefillSeconds.toFixed(3)} s (${t.promptTokensPerSecond.toFixed(1)} tok/s)`],
      ["decode", `${t.decodeSeconds.toFixed(3)} s (${t.decodeTokensPerSecond.toFixed(1)} tok/s)`],
    ]);
    $("result").textContent = JSON.stringify(result, null, 2);
    $("output").hidden = false;
    document.body.dataset.state = "done";
    $("status").textContent = `done: ${result.tokens.length} tokens (${result.stopReason})`;
  } catch (e) {
    document.body.dataset.state = "error";
    document.body.dataset.errorKind = errorKind(e);
    $("status").textContent = errorText(e);
  } finally {
    $("generate").disabled = false;
  }
}

$("form").addEventListener("submit", run);
if (params.has("autorun")) run();
