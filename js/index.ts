// fuselm: fused LLM text generation on the user's GPU through WebGPU.
//
// Every function here is a thin typed wrapper over the wasm module: it loads the module on first
// use and turns errors into `FuselmError`. The data types come from the Rust side via tsify.
import * as wasm from "./wasm/fuselm.js";
import type { AdapterReport, GenerationBenchOptions, GenerationBenchReport, ProbeOptions } from "./wasm/fuselm.js";
import { init } from "./init.js";
import { FuselmError, toFuselmError } from "./errors.js";
import { readAll, type ModelSource } from "./load.js";

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

/**
 * Reports what the user's GPU adapter can do: identity, features, limits next to the WebGPU
 * defaults, what model sizes fit, and with `{ bench: true }` measured dispatch, round-trip and
 * bandwidth costs. Rejects with a `FuselmError` (`kind` "webgpu-unavailable" or "no-adapter")
 * when there is no WebGPU.
 */
export async function probe(options?: ProbeOptions): Promise<AdapterReport> {
  try {
    await init();
    return await wasm.probe(options);
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
