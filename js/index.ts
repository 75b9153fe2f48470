// fuselm: fused LLM text generation on the user's GPU through WebGPU.
//
// Every function here is a thin typed wrapper over the wasm module: it loads the module on first
// use and turns errors into `FuselmError`. The data types come from the Rust side via tsify.
import * as wasm from "./wasm/fuselm.js";
import type { AdapterReport, ProbeOptions } from "./wasm/fuselm.js";
import { init } from "./init.js";
import { toFuselmError } from "./errors.js";

export { init } from "./init.js";
export { FuselmError, type ErrorKind } from "./errors.js";
export { loadModel, Model, type ModelSource } from "./model.js";
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
  SamplingOptions,
  Strategy,
  GenerateResult,
  GenerateTimings,
  StopReason,
  ModelInfo,
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
