// The `Model` interface and its call options: what both implementations share, the model on this
// thread (model.ts) and the model in a worker (worker-client.ts).
import type { Calibration, GenerateOptions, ModelInfo, PreparedFormat, ResponseFormat } from "./wasm/fuselm.js";
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
   * 8-token prompt; `runs` timed runs, default 3, after a warm-up) with every strategy that can
   * win on this model and adapter, and makes the fastest end to end the default strategy
   * (`info.strategy`, `info.strategyReason`) for generations that name none. With `cache` it
   * first looks for a calibration saved for this model on this adapter, and saves a new one.
   * Rejects with "busy" during a generation, "invalid-argument" for settings out of range. */
  calibrate(options?: CalibrateCallOptions): Promise<Calibration>;
  /** Applies a calibration saved earlier (e.g. `JSON.parse` of a stored one): rejects with
   * "invalid-argument" if it was measured for another model, adapter or version of fuselm. */
  useCalibration(calibration: Calibration): Promise<void>;
  /** Stops a running generation, then frees the model's GPU memory. Later calls reject with
   * kind "invalid-argument". Safe to call twice. */
  dispose(): Promise<void>;
}
