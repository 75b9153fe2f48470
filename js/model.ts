// A loaded model: generation (streamed), OpenAI-shaped chat, tokenization, info and dispose.
// The wasm `Model` owns the GPU memory; this class wraps it so every failure is a `FuselmError`
// and a disposed model fails with a typed error instead of a wasm trap.
import type * as wasm from "./wasm/fuselm.js";
import type { Calibration, ChatMessage, GenerateOptions, ModelInfo, PreparedFormat, ResponseFormat, SessionInfo } from "./wasm/fuselm.js";
import { calibrateWith, type CalibrateCallOptions } from "./calibration.js";
import { FuselmError, toFuselmError } from "./errors.js";
import { Generation } from "./generation.js";
import { sessionBytes } from "./session.js";
import { chatCompletions, type Chat } from "./chat.js";
import { estimateRaw, loadRaw, memoryInUseRaw, type EstimateMemoryOptions, type LoadModelOptions, type MemoryEstimate, type ModelSource } from "./load.js";
import { checkOptions, ESTIMATE_RULES, GENERATE_RULES, LOAD_RULES } from "./options.js";
import type { GenerateCallOptions, Model, TokenizeOptions } from "./model-types.js";

/** The model on this thread: a thin wrapper over the wasm `Model`. */
export class LocalModel implements Model {
  #raw: wasm.Model | undefined;
  #running: Generation | undefined;
  #info: ModelInfo;
  readonly chat: Chat;

  constructor(raw: wasm.Model) {
    this.#raw = raw;
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
    const bad = optionError(settings);
    if (bad) return this.#start(() => Promise.reject(bad), settings, signal);
    return this.#start((m, sink, o, go) => m.chat(messages, o, sink, go), settings, signal);
  }

  generate(prompt: string, options: GenerateCallOptions = {}): Generation {
    const { signal, ...settings } = options;
    if (typeof prompt !== "string") {
      return this.#start(() => Promise.reject(new FuselmError("invalid-argument", "prompt must be a string")), settings, signal);
    }
    const bad = optionError(settings);
    if (bad) return this.#start(() => Promise.reject(bad), settings, signal);
    return this.#start((m, sink, o, go) => m.generate(prompt, o, sink, go), settings, signal);
  }

  #start(
    call: (
      raw: wasm.Model,
      sink: (text: string, id: number | undefined) => boolean,
      options: GenerateOptions,
      keepGoing: () => boolean,
    ) => Promise<wasm.GenerateResult>,
    options: GenerateOptions,
    signal: AbortSignal | undefined,
  ): Generation {
    const generation = new Generation((sink, stop) => {
      const raw = this.#raw;
      if (raw === undefined) return Promise.reject(disposedError());
      // Asked between prefill batches: an abort does not wait for a long prompt.
      return call(raw, sink, options, () => !stop.aborted);
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

  async prepareResponseFormat(format: ResponseFormat): Promise<PreparedFormat> {
    if (typeof format !== "object" || format === null) {
      throw new FuselmError("invalid-argument", "format must be a responseFormat object, e.g. { type: \"json_schema\", schema }");
    }
    try {
      return this.#live().prepareResponseFormat(format);
    } catch (e) {
      throw toFuselmError(e);
    }
  }

  async saveSession(): Promise<Uint8Array> {
    try {
      return await this.#live().saveSession();
    } catch (e) {
      throw toFuselmError(e);
    }
  }

  async loadSession(bytes: Uint8Array | ArrayBuffer): Promise<SessionInfo> {
    const view = sessionBytes(bytes);
    try {
      return await this.#live().loadSession(view);
    } catch (e) {
      throw toFuselmError(e);
    }
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

/** A generation's options error (named as written), if any. */
function optionError(options: GenerateOptions): FuselmError | undefined {
  try {
    checkOptions(options, GENERATE_RULES);
    return undefined;
  } catch (e) {
    return toFuselmError(e);
  }
}

/**
 * Loads a GGUF model (llama family: Llama, SmolLM2, …) onto the user's GPU, streaming it: the
 * bytes go to the GPU as they arrive and the file is never held whole in memory. The header is
 * checked first, so a model the adapter cannot hold is refused (kind "limit-exceeded", with the
 * limit, needed and available) before its weights are downloaded. Other rejections:
 * "invalid-model" (not a supported GGUF), "unsupported-quant", "network", "aborted",
 * "webgpu-unavailable", "no-adapter"; "invalid-argument", before anything is downloaded, for an
 * option of the wrong type or out of range (the message names it as written).
 */
export async function loadModel(source: ModelSource, options: LoadModelOptions = {}): Promise<Model> {
  // Checked before anything is downloaded or built.
  checkOptions(options, LOAD_RULES);
  if (options.worker !== undefined && options.worker !== false) {
    const { loadInWorker } = await import("./worker-client.js");
    return loadInWorker(source, options);
  }
  return loadLocal(source, options);
}

/**
 * What loading `source` with these sizes will hold on the GPU — weights, KV cache at `nCtx`,
 * activations, other buffers and their total, in bytes — from its GGUF header alone: only the
 * header is read (a download stops there), nothing is uploaded. `inUse` is what the models
 * already loaded in this page hold, so `total <= budget - inUse` is the check `loadModel`'s
 * `memoryBudget` makes. Rejects like `loadModel` for a model the adapter cannot hold at all
 * ("limit-exceeded"), or a file that is not a supported GGUF.
 *
 * @example
 * const need = await estimateMemory(url, { nCtx: 4096 });
 * if (need.total > myBudget - need.inUse) showTooLarge(need);
 * else model = await loadModel(url, { nCtx: 4096, memoryBudget: myBudget });
 */
export async function estimateMemory(source: ModelSource, options: EstimateMemoryOptions = {}): Promise<MemoryEstimate> {
  checkOptions(options, ESTIMATE_RULES);
  return estimateRaw(source, options);
}

/** GPU bytes held by the models loaded in this page and not yet disposed (models in worker
 * mode are counted by their worker). */
export async function memoryInUse(): Promise<number> {
  return memoryInUseRaw();
}

/** `loadModel` on this thread. */
export async function loadLocal(source: ModelSource, options: LoadModelOptions = {}): Promise<LocalModel> {
  const raw = await loadRaw(source, options);
  return new LocalModel(raw);
}

export type { ChatMessage };
