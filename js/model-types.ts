// The `Model` interface and its call options: what both implementations share, the model on this
// thread (model.ts) and the model in a worker (worker-client.ts).
import type { Calibration, GenerateOptions, ModelInfo, PreparedFormat, ResponseFormat, SessionInfo } from "./wasm/fuselm.js";
import type { CalibrateCallOptions } from "./calibration.js";
import type { Generation } from "./generation.js";
import type { Chat } from "./chat.js";

/** Options of one generation: the settings of `GenerateOptions` plus an abort signal. */
export interface GenerateCallOptions extends GenerateOptions {
  /** Aborts the generation: the iteration, `text()` and `result()` reject with kind "aborted". */
  signal?: AbortSignal;
}

export interface TokenizeOptions {
  /** Prepend the model's BOS token when it uses one (as prompts get). Default: false. */
  addSpecial?: boolean;
  /** Recognise control tokens such as `<|im_start|>` written in the text. Default: false. */
  parseSpecial?: boolean;
}

/** A model on the GPU. One generation runs at a time (another one rejects with kind "busy"). */
export interface Model {
  /** Architecture, sizes, weight formats, GPU memory, and the default strategy with its reason
   * (updated by `calibrate` and `useCalibration`). */
  readonly info: ModelInfo;
  /** OpenAI-shaped chat: `model.chat.completions.create({ messages, stream, ... })`. */
  readonly chat: Chat;
  /** Generates from `prompt` (with `{ chat: true }` rendered as a user message with the model's
   * chat template). Greedy by default; `temperature`, `topK`, `topP`, `minP`, the penalties and
   * `seed` sample instead (the same seed gives the same tokens on every strategy and adapter).
   * `stop` strings end it and are never emitted. Returns at once: iterate the result for
   * streamed chunks, or await `.text()` / `.result()`. Rejects (through those) with kind "busy"
   * while another generation of this model runs, "limit-exceeded" when the prompt plus
   * `maxTokens` exceed `info.nCtx`, "invalid-argument" for an out-of-range setting, "aborted",
   * "device-lost". */
  generate(prompt: string, options?: GenerateCallOptions): Generation;
  /** Compiles a `responseFormat` for this model's vocabulary now and keeps it (a model keeps its
   * last 8 formats), so the first generation with it starts at once: prepare a page's schemas
   * while the user types. Resolves with the compile's seconds (near 0 when it was kept already)
   * and its size; rejects with kind "constraint" when the format cannot compile (the error a
   * generation would get), "busy" while a generation runs.
   *
   * ```ts
   * const { compileSeconds, tableBytes } = await model.prepareResponseFormat({ type: "json_schema", schema });
   * ```
   */
  prepareResponseFormat(format: ResponseFormat): Promise<PreparedFormat>;
  /** Token ids of `text`. */
  tokenize(text: string, options?: TokenizeOptions): Promise<number[]>;
  /** Text of token ids (control tokens render as nothing). */
  detokenize(ids: ArrayLike<number>): Promise<string>;
  /** The planner's calibration: times a short greedy generation (`tokens`, default 32, after an
   * 8-token prompt; `runs` timed runs, default 3, after a warm-up; on a software adapter such as
   * SwiftShader 8 tokens and 1 run) with every strategy that can
   * win on this model and adapter, and makes the fastest end to end the default strategy
   * (`info.strategy`, `info.strategyReason`) for generations that name none. With `cache` it
   * first looks for a calibration saved for this model on this adapter, and saves a new one.
   * Rejects with "busy" during a generation, "invalid-argument" for settings out of range. */
  calibrate(options?: CalibrateCallOptions): Promise<Calibration>;
  /** Applies a calibration saved earlier (e.g. `JSON.parse` of a stored one): rejects with
   * "invalid-argument" if it was measured for another model, adapter or version of fuselm. */
  useCalibration(calibration: Calibration): Promise<void>;
  /** Saves the conversation this model holds: the tokens of its KV cache (what the last
   * generation's prompt and output left there) with their cache rows, this model's identity and
   * a checksum, as bytes to keep (`storeSession` puts them in OPFS or Cache Storage). After a
   * reload, `loadSession` on the same model file puts them back, and the next
   * `chat.completions.create` (or `generate` with `reusePrefix: true`) whose prompt starts with
   * those tokens prefills only what follows — and continues exactly as the original would have.
   * Size: `2 × layers × kvHeads × headDim × 4` bytes per token (2 with `kvF16`), plus 40.
   * Rejects with kind "busy" during a generation.
   *
   * ```ts
   * import { loadModel, storeSession, readSession } from "fuselm";
   * const model = await loadModel(url);
   * const saved = await readSession("chat");
   * if (saved) await model.loadSession(saved); // a reload: the conversation's cache is back
   * const reply = await model.chat.completions.create({ messages });
   * await storeSession("chat", await model.saveSession());
   * ```
   */
  saveSession(): Promise<Uint8Array>;
  /** Restores a session that `saveSession` returned for this model file (any load of it with
   * the same `kvF16` and an `nCtx` that holds the session's tokens) and resolves with what it
   * holds. Rejects with kind "session" — leaving the model as it was — for bytes that are
   * damaged, not a session, or saved with another model (another fine-tune of the same shape
   * included) or KV format; "busy" during a generation. */
  loadSession(bytes: Uint8Array | ArrayBuffer): Promise<SessionInfo>;
  /** Stops a running generation, then frees the model's GPU memory. Later calls reject with
   * kind "invalid-argument". Safe to call twice. */
  dispose(): Promise<void>;
}
