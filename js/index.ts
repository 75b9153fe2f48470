// fuselm: fused LLM text generation on the user's GPU through WebGPU.
//
// Every function here is a thin typed wrapper over the wasm module: it loads the module on first
// use and turns errors into `FuselmError`. The data types come from the Rust side via tsify.
import * as wasm from "./wasm/fuselm.js";
import type { AdapterReport, GenerationBenchOptions, GenerationBenchReport, ProbeOptions } from "./wasm/fuselm.js";
import { init } from "./init.js";
import { FuselmError, toFuselmError } from "./errors.js";
import { estimateRaw, readAll, type EstimateMemoryOptions, type MemoryEstimate, type ModelSource } from "./load.js";
import { checkOptions, ESTIMATE_RULES } from "./options.js";

export { init } from "./init.js";
export { FuselmError, type ErrorKind } from "./errors.js";
export { loadModel, estimateMemory, memoryInUse } from "./model.js";
export type { Model, GenerateCallOptions, TokenizeOptions } from "./model-types.js";
export type { CalibrateCallOptions, CalibrationStore } from "./calibration.js";
export type { ModelSource, LoadModelOptions, LoadProgress, LoadPhase, MemoryEstimate, EstimateMemoryOptions } from "./load.js";
export type { Generation, GenerationChunk } from "./generation.js";
export type {
  Chat,
  ChatCompletions,
  ChatCompletionRequest,
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionUsage,
  ChatResponseFormat,
  ChatCompletionAnswer,
  ChatCompletionMessage,
  ChatTool,
  ChatToolCall,
  ChatToolCallDelta,
  ChatToolChoice,
  ChatTokenLogprob,
  ChatLogprobs,
  FinishReason,
} from "./chat.js";
export { deleteCachedModel, type CacheMode } from "./cache.js";
export { storeSession, readSession, deleteSession, type SessionStore, type SessionStoreOptions } from "./session.js";
export {
  createSimulation,
  evaluatePopulation,
  simBench,
  type Simulation,
  type PopulationResult,
  type EvolutionResult,
} from "./sim.js";
export type {
  AdapterReport,
  ProbeOptions,
  AdapterIdentity,
  FeatureReport,
  AdapterLimits,
  ModelFit,
  BenchReport,
  Measurement,
  TimerKind,
  LoadOptions,
  GenerateOptions,
  ResponseFormat,
  SessionInfo,
  JsonSchema,
  JsonValue,
  SamplingOptions,
  Strategy,
  GenerateResult,
  GenerateTimings,
  PreparedFormat,
  TokenLogprob,
  TopLogprob,
  StopReason,
  ModelInfo,
  MemoryUse,
  QuantUse,
  ChatMessage,
  GenerationBenchOptions,
  GenerationBenchReport,
  GenerationBenchRow,
  CalibrateOptions,
  Calibration,
  CalibrationRun,
  Spread,
  StepProfile,
  RoleProfile,
  Env,
  CustomEnv,
  Policy,
  SimStrategy,
  SimulationOptions,
  SimulationInfo,
  EvaluateOptions,
  EvolveOptions,
  EsResult,
  GenerationStats,
  EpisodeTrace,
  Fitness,
  SimBenchOptions,
  SimBenchReport,
  SimBenchRow,
} from "./wasm/fuselm.js";

/** `probe`'s options: the adapter report's, and optionally a model whose GPU memory to estimate. */
export interface ProbeCallOptions extends ProbeOptions {
  /** Also estimate what loading this model will hold on the GPU (`estimateMemory`): only its
   * GGUF header is read, so a page can tell before the download whether it fits. */
  model?: ModelSource;
  /** The sizes of that load, as `loadModel`'s. */
  nCtx?: number;
  maxBatch?: number;
  kvF16?: boolean;
}

/** `probe`'s report: the adapter's, with the model's estimate when `model` was given. */
export interface ProbeReport extends AdapterReport {
  /** What loading `options.model` will hold on the GPU, and what this page's models hold now. */
  memory?: MemoryEstimate;
}

/**
 * Reports what the user's GPU adapter can do: identity, features, limits next to the WebGPU
 * defaults, what model sizes fit, and with `{ bench: true }` measured dispatch, round-trip and
 * bandwidth costs; with `{ model, nCtx }` also the GPU memory that model will need (`memory`,
 * from its header alone; compare it with your budget before calling `loadModel`). Rejects with a
 * `FuselmError` (`kind` "webgpu-unavailable" or "no-adapter") when there is no WebGPU, and as
 * `estimateMemory` does for a model that cannot load here.
 *
 * @example
 * const report = await probe({ model: url, nCtx: 4096 });
 * if (report.memory!.total > budget - report.memory!.inUse) showTooLarge(report.memory!);
 */
export async function probe(options?: ProbeCallOptions): Promise<ProbeReport> {
  try {
    const { model, nCtx, maxBatch, kvF16, ...adapter } = options ?? {};
    const sizes: EstimateMemoryOptions = {
      ...(nCtx === undefined ? {} : { nCtx }),
      ...(maxBatch === undefined ? {} : { maxBatch }),
      ...(kvF16 === undefined ? {} : { kvF16 }),
    };
    if (model !== undefined) checkOptions(sizes, ESTIMATE_RULES);
    await init();
    const report: ProbeReport = await wasm.probe(options === undefined ? undefined : adapter);
    if (model !== undefined) report.memory = await estimateRaw(model, sizes);
    return report;
  } catch (e) {
    throw toFuselmError(e);
  }
}

/**
 * Runs every generation strategy side by side on this device and reports decode and prefill
 * tokens per second, time to first token, dispatches and submits per token and the speed-up over
 * the unfused baseline (medians of `runs` after a warm-up), plus a markdown table: the same report
 * as the native `fuselm bench`. With `model` (any `loadModel` source) it runs prompts of 16 and
 * 128 tokens (and ~1,000 tokens of context unless `longContext: false`), with `profile: true` the
 * per-kernel-role profile; `toy: true` (the default without a model) runs synthetic models.
 * A model file above 1 GiB is refused ("limit-exceeded"): the file is held whole in wasm memory.
 */
/** The largest model file `bench()` takes: it holds the whole file in wasm memory (4 GiB at most,
 * shared with everything else the module holds); a 2.39 GB file trapped there. */
const BENCH_MAX_BYTES = 1 << 30;

export async function bench(options?: GenerationBenchOptions, model?: ModelSource): Promise<GenerationBenchReport> {
  try {
    const [bytes] = await Promise.all([model === undefined ? undefined : readAll(model), init()]);
    if (bytes !== undefined && bytes.length > BENCH_MAX_BYTES) {
      throw new FuselmError(
        "limit-exceeded",
        `bench() copies the model file into wasm memory, at most ${BENCH_MAX_BYTES} bytes; this one is ${bytes.length} ` +
          "(time a larger model with generate()'s timings, or the native `fuselm bench`)",
        { limit: "bench model size", needed: bytes.length, available: BENCH_MAX_BYTES },
      );
    }
    return await wasm.bench(options, bytes);
  } catch (e) {
    throw toFuselmError(e);
  }
}
