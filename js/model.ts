// Loading a GGUF model and generating with it. The wasm `Model` owns the GPU memory; this class
// wraps it so every rejection is a `FuselmError` and a freed model fails with a typed error
// instead of a wasm trap.
import * as wasm from "./wasm/fuselm.js";
import type { GenerateOptions, GenerateResult, LoadOptions, ModelInfo } from "./wasm/fuselm.js";
import { init } from "./init.js";
import { FuselmError, toFuselmError } from "./errors.js";

/** Where a model comes from: its bytes, a fetched `Response`, or a URL to fetch. */
export type ModelSource = Uint8Array | ArrayBuffer | Response | string | URL;

/**
 * Loads a GGUF model (llama family: Llama, SmolLM2, Qwen2, …) onto the user's GPU. A string or
 * URL is fetched; a failed fetch or non-2xx status rejects with kind "invalid-argument", a file
 * that is not a supported GGUF with "invalid-model", a model too big for the adapter with
 * "limit-exceeded". The whole file is read into memory once, then uploaded.
 */
export function loadModel(source: ModelSource, options?: LoadOptions): Promise<Model> {
  return Model.load(source, options);
}

/** A model on the GPU. One generation runs at a time; call `free()` to release GPU memory. */
export class Model {
  #raw: wasm.Model | undefined;

  private constructor(raw: wasm.Model) {
    this.#raw = raw;
  }

  /** The same as `loadModel`. */
  static async load(source: ModelSource, options?: LoadOptions): Promise<Model> {
    try {
      const [bytes] = await Promise.all([readSource(source), init()]);
      return new Model(await wasm.loadModel(bytes, options));
    } catch (e) {
      throw toFuselmError(e);
    }
  }

  /**
   * Generates from `prompt` (with `{ chat: true }`, rendered as a user message with the model's
   * chat template). Greedy by default; `temperature`, `topK`, `topP`, `minP`, the penalties and
   * `seed` sample instead (the same seed gives the same tokens on every strategy and adapter).
   * `strategy` picks how it runs: "fused" (default; sampling on the GPU, `chunkTokens` steps per
   * compute pass) or "unfused" (the baseline: one submit and logits readback per token). Rejects
   * with kind "busy" while another generation of this model runs, "limit-exceeded" when the
   * prompt plus `maxTokens` exceed the model's `nCtx`, "invalid-argument" for an out-of-range
   * setting.
   */
  async generate(prompt: string, options?: GenerateOptions): Promise<GenerateResult> {
    try {
      return await this.#live().generate(prompt, options);
    } catch (e) {
      throw toFuselmError(e);
    }
  }

  /** Hyper-parameters and the KV-cache capacity (`nCtx`) this model was loaded with. */
  info(): ModelInfo {
    try {
      return this.#live().info();
    } catch (e) {
      throw toFuselmError(e);
    }
  }

  /** Releases the model's GPU memory (after a running generation ends). Safe to call twice. */
  free(): void {
    this.#raw?.free();
    this.#raw = undefined;
  }

  #live(): wasm.Model {
    if (this.#raw === undefined) throw new FuselmError("invalid-argument", "this model was freed");
    return this.#raw;
  }
}

export async function readSource(source: ModelSource): Promise<Uint8Array> {
  if (source instanceof Uint8Array) return source;
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  let response: Response;
  if (typeof Response !== "undefined" && source instanceof Response) {
    response = source;
  } else {
    try {
      response = await fetch(source as string | URL);
    } catch (e) {
      throw new FuselmError("invalid-argument", `could not fetch the model from ${String(source)}: ${String(e)}`, { cause: e });
    }
  }
  if (!response.ok) {
    const where = response.url || String(source);
    throw new FuselmError("invalid-argument", `could not fetch the model from ${where}: HTTP ${response.status} ${response.statusText}`.trimEnd());
  }
  return new Uint8Array(await response.arrayBuffer());
}
