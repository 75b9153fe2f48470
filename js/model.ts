// A loaded model: generation (streamed), OpenAI-shaped chat, tokenization, info and dispose.
// The wasm `Model` owns the GPU memory; this class wraps it so every failure is a `FuselmError`
// and a disposed model fails with a typed error instead of a wasm trap.
import type * as wasm from "./wasm/fuselm.js";
import type { Calibration, ChatMessage, GenerateOptions, ModelInfo, Strategy } from "./wasm/fuselm.js";
import { calibrateWith, type CalibrateCallOptions } from "./calibration.js";
import { FuselmError, toFuselmError } from "./errors.js";
import { Generation } from "./generation.js";
import { chatCompletions, type Chat } from "./chat.js";
import { loadRaw, type LoadModelOptions, type ModelSource } from "./load.js";

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

/** The model on this thread: a thin wrapper over the wasm `Model`. */
export class LocalModel implements Model {
  #raw: wasm.Model | undefined;
  #running: Generation | undefined;
  readonly #strategy: Strategy | undefined;
  #info: ModelInfo;
  readonly chat: Chat;

  constructor(raw: wasm.Model, strategy: Strategy | undefined) {
    this.#raw = raw;
    this.#strategy = strategy;
    this.#info = raw.info();
    this.chat = {
      completions: chatCompletions(
        (messages, options, signal) => this.generateChat(messages, { ...options, signal }),
        () => `fuselm/${this.info.architecture}`,
      ),
    };
  }

  get info(): ModelInfo {
    return this.#info;
  }

  calibrate(options: CalibrateCallOptions = {}): Promise<Calibration> {
    return calibrateWith(
      {
        key: () => this.calibrationKey(),
        measure: async (settings) => {
          try {
            return await this.#live().calibrate(settings);
          } catch (e) {
            throw toFuselmError(e);
          } finally {
            this.#refresh();
          }
        },
        apply: (c) => this.useCalibration(c),
      },
      options,
    );
  }

  async useCalibration(calibration: Calibration): Promise<void> {
    try {
      this.#live().useCalibration(calibration);
    } catch (e) {
      throw toFuselmError(e);
    }
    this.#refresh();
  }

  /** The key a calibration of this model on this adapter carries (the worker's cache lookups). */
  async calibrationKey(): Promise<string> {
    return this.#live().calibrationKey();
  }

  #refresh(): void {
    if (this.#raw !== undefined) this.#info = this.#raw.info();
  }

  /** Generation from a conversation rendered with the chat template (what `chat.completions`
   * runs; the worker calls it directly). */
  generateChat(messages: ChatMessage[], options: GenerateCallOptions = {}): Generation {
    const { signal, ...settings } = options;
    return this.#start((m, sink, o) => m.chat(messages, o, sink), settings, signal);
  }

  generate(prompt: string, options: GenerateCallOptions = {}): Generation {
    const { signal, ...settings } = options;
    if (typeof prompt !== "string") {
      return this.#start(() => Promise.reject(new FuselmError("invalid-argument", "prompt must be a string")), settings, signal);
    }
    return this.#start((m, sink, o) => m.generate(prompt, o, sink), settings, signal);
  }

  #start(
    call: (raw: wasm.Model, sink: (text: string, id: number | undefined) => boolean, options: GenerateOptions) => Promise<wasm.GenerateResult>,
    options: GenerateOptions,
    signal: AbortSignal | undefined,
  ): Generation {
    const withStrategy: GenerateOptions = { ...options, strategy: options.strategy ?? this.#strategy };
    const generation = new Generation((sink) => {
      const raw = this.#raw;
      if (raw === undefined) return Promise.reject(disposedError());
      return call(raw, sink, withStrategy);
    }, signal);
    this.#running = generation;
    void generation.result().then(
      () => this.#clear(generation),
      () => this.#clear(generation),
    );
    return generation;
  }

  #clear(generation: Generation): void {
    if (this.#running === generation) this.#running = undefined;
  }

  async tokenize(text: string, options: TokenizeOptions = {}): Promise<number[]> {
    if (typeof text !== "string") throw new FuselmError("invalid-argument", "text must be a string");
    try {
      return Array.from(this.#live().tokenize(text, options.addSpecial ?? false, options.parseSpecial ?? false));
    } catch (e) {
      throw toFuselmError(e);
    }
  }

  async detokenize(ids: ArrayLike<number>): Promise<string> {
    const list = Array.from(ids);
    if (!list.every((id) => Number.isInteger(id) && id >= 0 && id <= 0xffffffff)) {
      throw new FuselmError("invalid-argument", "token ids must be non-negative integers");
    }
    try {
      return this.#live().detokenize(Uint32Array.from(list));
    } catch (e) {
      throw toFuselmError(e);
    }
  }

  async dispose(): Promise<void> {
    const raw = this.#raw;
    if (raw === undefined) return;
    this.#raw = undefined;
    const running = this.#running;
    if (running !== undefined) {
      running.abort(new FuselmError("aborted", "the model was disposed"));
      await running.result().catch(() => {});
    }
    raw.free();
  }

  #live(): wasm.Model {
    if (this.#raw === undefined) throw disposedError();
    return this.#raw;
  }
}

function disposedError(): FuselmError {
  return new FuselmError("invalid-argument", "this model was disposed");
}

/**
 * Loads a GGUF model (llama family: Llama, SmolLM2, …) onto the user's GPU, streaming it: the
 * bytes go to the GPU as they arrive and the file is never held whole in memory. The header is
 * checked first, so a model the adapter cannot hold is refused (kind "limit-exceeded", with the
 * limit, needed and available) before its weights are downloaded. Other rejections:
 * "invalid-model" (not a supported GGUF), "unsupported-quant", "network", "aborted",
 * "webgpu-unavailable", "no-adapter".
 */
export async function loadModel(source: ModelSource, options: LoadModelOptions = {}): Promise<Model> {
  if (options.worker !== undefined && options.worker !== false) {
    const { loadInWorker } = await import("./worker-client.js");
    return loadInWorker(source, options);
  }
  return loadLocal(source, options);
}

/** `loadModel` on this thread. */
export async function loadLocal(source: ModelSource, options: LoadModelOptions = {}): Promise<LocalModel> {
  const raw = await loadRaw(source, options);
  return new LocalModel(raw, options.strategy);
}

export type { ChatMessage };
