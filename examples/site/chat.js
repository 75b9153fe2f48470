// The chat page: a multi-turn conversation with a GGUF model on this GPU, through the
// OpenAI-shaped `model.chat.completions.create({ messages, stream: true })`. Each request sends the
// whole conversation (as with OpenAI); fuselm reuses the KV cache of the shared prefix, so a new
// turn only prefills what is new (`usage.prompt_tokens_details.cached_tokens`).
//
// Query parameters: ?model=URL prefills the model field, &autoload loads it, &cache=none|cache-api|opfs.
// The preset list fills the URL field with a model served from /models/ (scripts/fetch-model).
// For tests the page exposes `document.body.dataset.state` ("idle" | "loading" | "ready" |
// "generating" | "error"), `dataset.errorKind` after an error, `dataset.phases` (the load phases
// seen, in order) and `dataset.fromCache` when the bytes came from the cache; for tests and the
// devtools console, `window.fuselmChat.model` is the loaded Model (e.g. `.detokenize(ids)`).
// The conversation survives a reload: after each answer the page keeps the model's KV cache as a
// saved session in OPFS (`model.saveSession()`, `storeSession`) and the messages in localStorage,
// both under the model's name; loading that model again restores them (`loadSession`), so the next
// turn prefills only itself. "New chat" deletes them. `dataset.restored` is the number of tokens
// restored (tests).
// Past the model's context (`nCtx`; ?nCtx=N sets it) the conversation goes on: fuselm drops the
// oldest tokens after the system message (its context shift) and reports how many
// (`usage.extra.dropped_tokens`, and `dropped_messages` for whole turns left out); the page shows a
// note above the composer and sets `dataset.droppedTokens` / `dataset.droppedMessages` (tests).
// In your own site: `import { loadModel } from "fuselm"`.
import { loadModel, storeSession, readSession, deleteSession } from "../../dist/index.js";
import { $, clearError, errorKind, fmtBytes, fmtNumber, showError } from "./ui.js";

const params = new URLSearchParams(location.search);
$("model-url").value = params.get("model") ?? $("preset").options[0].value;
if (params.has("cache")) $("cache").value = params.get("cache");

// The preset list and the URL field show the same model: a preset fills the field, and a URL
// typed (or given by ?model=) selects its preset, or "other".
function syncPreset() {
  const url = $("model-url").value.trim();
  const preset = [...$("preset").options].find((o) => o.value !== "" && o.value === url);
  $("preset").value = preset ? preset.value : "";
}
$("preset").addEventListener("change", () => {
  if ($("preset").value) $("model-url").value = $("preset").value;
  else $("model-url").select();
});
$("model-url").addEventListener("input", syncPreset);
syncPreset();

let model; // the loaded Model, if any
let modelName = "";
let loadAbort; // AbortController of the load in progress
let generation; // { abort: AbortController } of the answer in progress
/** The conversation sent with every request: { role, content }[] (the system prompt is added per request). */
let conversation = [];
window.fuselmChat = {
  get model() {
    return model;
  },
};

function setState(state) {
  document.body.dataset.state = state;
  const busy = state === "loading" || state === "generating" || state === "calibrating";
  $("send").disabled = !model || busy;
  $("stop").disabled = state !== "generating";
  $("load").disabled = busy;
  $("preset").disabled = busy;
  $("model-file").disabled = busy;
  $("unload").disabled = busy;
  $("calibrate").disabled = !model || busy;
}

// ---------------------------------------------------------------- loading

function showProgress(p) {
  const order = ["download", "parse", "upload", "compile"];
  const at = order.indexOf(p.phase);
  for (const li of $("progress").querySelectorAll("li")) {
    const i = order.indexOf(li.dataset.phase);
    li.className = i < at ? "done" : i === at ? "active" : "";
  }
  const seen = document.body.dataset.phases ? document.body.dataset.phases.split(",") : [];
  if (seen.at(-1) !== p.phase) document.body.dataset.phases = [...seen, p.phase].join(",");
  if (p.fromCache) document.body.dataset.fromCache = "true";
  const bar = $("progress-bar");
  if (p.totalBytes) bar.value = Math.min(1, p.loadedBytes / p.totalBytes);
  else bar.removeAttribute("value"); // indeterminate: the size is unknown
  const amount = p.totalBytes ? `${fmtBytes(p.loadedBytes)} / ${fmtBytes(p.totalBytes)}` : fmtBytes(p.loadedBytes);
  $("progress-text").textContent = `${p.phase} ${amount}${p.fromCache ? " (from cache)" : ""}`;
}

let loadSeconds = 0; // shown in the model's info

function showInfo(info, seconds = loadSeconds) {
  loadSeconds = seconds;
  const m = info.memory;
  const entries = [
    ["model", modelName],
    ["loaded in", `${seconds.toFixed(1)} s`],
    ["architecture", `${info.architecture}, ${info.layers} layers, d ${info.embeddingLength}, ${info.heads} heads (${info.kvHeads} kv)`],
    ["weights", info.quantTypes.map((q) => `${q.ggmlType} ×${q.matrices} (${fmtBytes(q.bytes)})`).join(", ")],
    ["GPU memory", `${fmtBytes(m.total)} (weights ${fmtBytes(m.weights)}, KV cache ${fmtBytes(m.kvCache)}, activations ${fmtBytes(m.activations)})`],
    ["context", `${info.nCtx} tokens (trained ${info.contextLength})`],
    ["vocabulary", `${info.vocabSize}${info.chatTemplate ? ", chat template" : ", no chat template"}`],
    ["adapter", info.adapter || "–"],
    ["strategy", info.strategyReason.startsWith(info.strategy) ? info.strategyReason : `${info.strategy}: ${info.strategyReason}`],
  ];
  $("model-info").replaceChildren(
    ...entries.flatMap(([k, v]) => {
      const dt = document.createElement("dt");
      const dd = document.createElement("dd");
      dt.textContent = k;
      dd.textContent = v;
      return [dt, dd];
    }),
  );
  $("model-summary").hidden = false;
  $("strategy").options[0].textContent = `model default (${info.strategy})`;
}

async function unload() {
  if (!model) return;
  const old = model;
  model = undefined;
  $("model-summary").hidden = true;
  $("strategy").options[0].textContent = "model default";
  delete document.body.dataset.calibrated;
  await old.dispose();
}

async function load(source, name) {
  clearError($("error"));
  await unload();
  modelName = name;
  loadAbort = new AbortController();
  delete document.body.dataset.phases;
  delete document.body.dataset.fromCache;
  setState("loading");
  $("progress").hidden = false;
  $("status").textContent = `loading ${name}…`;
  const t0 = performance.now();
  try {
    const options = { onProgress: showProgress, signal: loadAbort.signal };
    if (params.has("nCtx")) options.nCtx = Number(params.get("nCtx"));
    // The cache only applies to sources fetched by URL.
    if (typeof source === "string") options.cache = $("cache").value;
    model = await loadModel(source, options);
    const seconds = (performance.now() - t0) / 1000;
    showInfo(model.info, seconds);
    $("status").textContent = `${name} is ready (${seconds.toFixed(1)} s).`;
    const restored = await restore();
    if (restored) $("status").textContent += ` ${restored}`;
    setState("ready");
    $("prompt").focus();
  } catch (e) {
    if (errorKind(e) === "aborted") {
      $("status").textContent = "Loading cancelled.";
      setState("idle");
    } else {
      $("status").textContent = "";
      showError($("error"), e, `Loading ${name}`);
      setState("error");
    }
  } finally {
    loadAbort = undefined;
    $("progress").hidden = true;
  }
}

$("load-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const url = $("model-url").value.trim();
  if (url) load(url, url.split("/").pop() || url);
});
$("model-file").addEventListener("change", () => {
  const file = $("model-file").files?.[0];
  if (file) load(file, file.name);
});
$("cancel-load").addEventListener("click", () => loadAbort?.abort());
// The planner's calibration: each strategy that can win is timed on a short generation on this
// GPU and the fastest becomes the model's default; the result is kept in localStorage, so the next
// visit with the same model and adapter applies it at once.
$("calibrate").addEventListener("click", async () => {
  if (!model) return;
  clearError($("error"));
  setState("calibrating");
  $("status").textContent = "Calibrating: timing each strategy on a short generation…";
  try {
    const c = await model.calibrate({ cache: true });
    showInfo(model.info);
    document.body.dataset.calibrated = c.strategy;
    const timings = c.results.map((r) => `${r.strategy} ${fmtNumber(r.endToEndTokensPerSecond.median, 0)} tok/s`).join(", ");
    $("status").textContent = c.fromCache
      ? `Calibration from this browser's cache: ${c.strategy} is the default (${timings}).`
      : `Calibrated: ${c.strategy} is the default now (${timings}).`;
  } catch (e) {
    $("status").textContent = "";
    showError($("error"), e, "Calibration");
  } finally {
    setState(model ? "ready" : "idle");
  }
});
$("unload").addEventListener("click", async () => {
  await unload();
  $("status").textContent = "Model unloaded: its GPU memory is free.";
  setState("idle");
});

// ---------------------------------------------------------------- kept across reloads

const savedKey = () => `chat:${modelName}`;

/** Keeps the conversation (localStorage) and the model's KV cache (a session in OPFS). A failure
 * only costs the next visit a longer first prefill: the note returned says so. */
async function keep() {
  try {
    localStorage.setItem(`fuselm-${savedKey()}`, JSON.stringify({ system: $("system").value, conversation }));
    await storeSession(savedKey(), await model.saveSession());
    return "";
  } catch (e) {
    return `The conversation could not be kept for the next visit (${errorKind(e)}).`;
  }
}

/** After a load: the conversation kept for this model, with its KV cache. Returns a status note. */
async function restore() {
  const text = localStorage.getItem(`fuselm-${savedKey()}`);
  if (!text) return "";
  let kept;
  try {
    kept = JSON.parse(text);
  } catch {
    return "";
  }
  if (!Array.isArray(kept.conversation) || kept.conversation.length === 0) return "";
  conversation = kept.conversation;
  if (typeof kept.system === "string") $("system").value = kept.system;
  $("messages").replaceChildren();
  for (const m of conversation) addMessage(m.role, m.content);
  try {
    const bytes = await readSession(savedKey());
    if (!bytes) return "The earlier conversation is back (its first answer prefills it again).";
    const { tokens } = await model.loadSession(bytes);
    document.body.dataset.restored = String(tokens);
    return `The earlier conversation is back, with its ${tokens}-token cache.`;
  } catch (e) {
    // Another model file under this name, another kvF16, a damaged entry: the text stays.
    return `The earlier conversation is back; its cache was not (${errorKind(e)}), so the next answer prefills it again.`;
  }
}

async function forget() {
  localStorage.removeItem(`fuselm-${savedKey()}`);
  delete document.body.dataset.restored;
  await deleteSession(savedKey()).catch(() => {});
}

// ---------------------------------------------------------------- the conversation

function addMessage(role, text) {
  $("empty")?.remove();
  const msg = document.createElement("div");
  msg.className = `msg ${role}`;
  const bubble = document.createElement("div");
  bubble.className = "bubble";
  bubble.textContent = text;
  msg.append(bubble);
  $("messages").append(msg);
  scrollDown(true);
  return msg;
}

function scrollDown(force = false) {
  const box = $("messages");
  if (force || box.scrollHeight - box.scrollTop - box.clientHeight < 80) box.scrollTop = box.scrollHeight;
}

function number(id) {
  const raw = $(id).value.trim();
  return raw === "" ? undefined : Number(raw);
}

function request(signal) {
  const system = $("system").value.trim();
  const req = {
    messages: [...(system ? [{ role: "system", content: system }] : []), ...conversation],
    stream: true,
    max_tokens: number("max-tokens"),
    temperature: number("temperature"),
    top_p: number("top-p"),
    top_k: number("top-k"),
    seed: number("seed"),
    signal,
  };
  if ($("strategy").value) req.strategy = $("strategy").value;
  for (const k of Object.keys(req)) if (req[k] === undefined) delete req[k];
  return req;
}

/** The note that older turns are out of the model's context (hidden while none are). */
function showDropped(tokens, messages) {
  document.body.dataset.droppedTokens = String(tokens);
  document.body.dataset.droppedMessages = String(messages);
  const note = $("context-note");
  note.hidden = tokens === 0 && messages === 0;
  const parts = [];
  if (messages > 0) parts.push(`the oldest ${messages} message${messages === 1 ? "" : "s"}`);
  if (tokens > 0) parts.push(`${fmtNumber(tokens, 0)} older tokens`);
  note.textContent = `This conversation is longer than the model's context (${model.info.nCtx} tokens): ${parts.join(" and ")} are out of its view. It still sees ${$("system").value.trim() ? "the system message and " : ""}the recent turns.`;
}

async function send(text) {
  if (!model || generation) return;
  clearError($("error"));
  // "New chat" replaces `conversation`; an answer still finishing then belongs to the old one.
  const history = conversation;
  history.push({ role: "user", content: text });
  const userMsg = addMessage("user", text);
  const msg = addMessage("assistant", "");
  msg.classList.add("streaming");
  const bubble = msg.querySelector(".bubble");
  const meta = document.createElement("div");
  meta.className = "meta";
  msg.append(meta);

  const abort = new AbortController();
  generation = { abort };
  const strategy = $("strategy").value || model.info.strategy;
  setState("generating");
  $("status").textContent = "thinking…";
  const t0 = performance.now();
  let first, answer = "", usage, finish, failure;
  let pieces = 0; // content chunks received (tests read it: the answer streamed)
  try {
    const stream = await model.chat.completions.create(request(abort.signal));
    for await (const chunk of stream) {
      const choice = chunk.choices?.[0];
      const delta = choice?.delta?.content;
      if (delta) {
        first ??= performance.now();
        answer += delta;
        bubble.textContent = answer;
        msg.dataset.pieces = String(++pieces);
        scrollDown();
        $("status").textContent = "generating…";
      }
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
  } catch (e) {
    if (errorKind(e) === "aborted") finish = "stopped";
    else failure = e;
  }
  const end = performance.now();
  const seconds = (end - t0) / 1000;
  msg.classList.remove("streaming");
  msg.dataset.finish = failure ? "error" : finish ?? "stop";
  generation = undefined;

  if (failure) {
    // Keep the conversation consistent: the failed turn is not part of it.
    history.pop();
    userMsg.classList.add("failed");
    msg.classList.add("failed");
    bubble.textContent = answer || "(no answer)";
    meta.textContent = "failed";
    $("status").textContent = "";
    if (errorKind(failure) === "device-lost") {
      // The GPU device is gone with the model's buffers: a new load is needed.
      model = undefined;
      $("model-summary").hidden = true;
      $("strategy").options[0].textContent = "model default";
    }
    showError($("error"), failure, "Generation");
    setState("error");
    return;
  }
  if (answer === "" && finish === "stopped") {
    // Stopped before the first token: nothing to keep.
    history.pop();
    bubble.textContent = "(stopped)";
  } else {
    history.push({ role: "assistant", content: answer });
  }
  // Completion tokens: the final chunk's usage; after a stop there is none, so count them.
  let tokens = usage?.completion_tokens;
  const exact = tokens !== undefined;
  if (!exact && answer) {
    try {
      tokens = (await model.tokenize(answer, { addSpecial: false })).length;
    } catch {
      // Only the statistics line needs it.
    }
  }
  tokens ??= 0;
  // Decode speed: fuselm's own measurement on the final chunk (usage.extra); after a stop there is
  // none, so the tokens after the first over the time after it (the first token's time is the
  // prompt's prefill, shown apart); a one-token answer has only the overall rate.
  const extra = usage?.extra;
  let rate = tokens > 1 && first !== undefined && end > first ? (tokens - 1) / ((end - first) / 1000) : tokens / seconds;
  if (extra && tokens > 1 && Number.isFinite(extra.decode_tokens_per_s)) rate = extra.decode_tokens_per_s;
  const parts = [
    `${exact ? "" : "≈"}${tokens} token${tokens === 1 ? "" : "s"}`,
    `${fmtNumber(rate, rate < 10 ? 2 : 1)} tok/s`,
  ];
  const ttft = extra?.time_to_first_token_s ?? (first === undefined ? undefined : (first - t0) / 1000);
  if (ttft !== undefined) parts.push(`first token ${ttft.toFixed(2)} s`);
  if (usage) parts.push(`prompt ${usage.prompt_tokens} (${usage.prompt_tokens_details?.cached_tokens ?? 0} cached)`);
  parts.push(strategy);
  parts.push(finish === "stopped" ? "stopped" : finish === "length" ? "max_tokens reached" : "done");
  meta.textContent = parts.join(" · ");
  msg.dataset.tokensPerSecond = String(rate);
  if (extra) showDropped(extra.dropped_tokens ?? 0, extra.dropped_messages ?? 0);
  // Kept before the page is ready again: a save and the next turn never run at once.
  const note = history === conversation ? await keep() : "";
  $("status").textContent = (finish === "stopped" ? "Stopped. Say something else? " : "") + note;
  setState("ready");
  $("prompt").focus();
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("prompt").value.trim();
  if (!text || !model || generation) return;
  $("prompt").value = "";
  send(text);
});
$("prompt").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", () => generation?.abort.abort());
$("new-chat").addEventListener("click", () => {
  generation?.abort.abort();
  conversation = [];
  $("context-note").hidden = true;
  delete document.body.dataset.droppedTokens;
  delete document.body.dataset.droppedMessages;
  if (model) void forget();
  const empty = document.createElement("p");
  empty.className = "empty";
  empty.id = "empty";
  empty.textContent = model ? "New conversation. Say something." : "Load a model, then say something.";
  $("messages").replaceChildren(empty);
});

setState("idle");
if (params.has("autoload")) $("load-form").requestSubmit();
