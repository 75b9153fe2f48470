// Simulation: a population of policies, each driven through a whole episode of an environment
// on the GPU (one dispatch for the whole episode of the whole population, or one per step as the
// baseline), and evolution strategies with every generation on the GPU. A thin typed wrapper
// over the wasm `Simulation`: typed arrays in and out, every failure a `FuselmError`, and a freed
// simulation failing with a typed error instead of a wasm trap.
import * as wasm from "./wasm/fuselm.js";
import type {
  EpisodeTrace,
  EsResult,
  EvaluateOptions,
  EvolveOptions,
  SimBenchOptions,
  SimBenchReport,
  SimStrategy,
  SimulationInfo,
  SimulationOptions,
} from "./wasm/fuselm.js";
import { init } from "./init.js";
import { FuselmError, toFuselmError } from "./errors.js";

/** Every member's fitness, in member order. */
export interface PopulationResult {
  /** Sum of each member's rewards. */
  totalReward: Float32Array;
  /** Steps each member took before its episode ended (termination or `episodeLength`). */
  steps: Uint32Array;
  strategy: SimStrategy;
  /** GPU dispatches the evaluation recorded (fused: 1; unfused: one per step). */
  dispatches: number;
  /** Wall time of the call (upload, GPU work, readback), in milliseconds. */
  elapsedMs: number;
}

/** Evolution's result: the new mean and each generation's statistics. */
export interface EvolutionResult extends Omit<EsResult, "theta"> {
  /** The mean parameters after the last generation (one member's worth). */
  theta: Float32Array;
}

/** An environment × policy × population compiled on the GPU; evaluate and evolve it as often as
 * you like, then `free()` it. */
export interface Simulation {
  /** Parameters per member, sizes, and dispatches per evaluation. */
  readonly info: SimulationInfo;
  /** Every member's fitness for `params`: `population × info.parameters` floats, member after
   * member (a policy's weights row-major, each layer's bias after its matrix). Rejects with
   * "invalid-argument" for a wrong length. */
  evaluate(params: Float32Array | ArrayLike<number>, options?: EvaluateOptions): Promise<PopulationResult>;
  /** Evolution strategies (antithetic Gaussian perturbations of `theta`, centred ranks, a
   * gradient step), all `generations` on the GPU in one submission; only the new mean and the
   * per-generation statistics come back. Needs an even population. */
  evolve(theta: Float32Array | ArrayLike<number>, options: EvolveOptions): Promise<EvolutionResult>;
  /** One member's episode step by step with one member's `params` (the CPU reference), for
   * showing a policy at work. Throws for a custom environment (it has no CPU reference). */
  trace(params: Float32Array | ArrayLike<number>, options?: { member?: number; seed?: number }): EpisodeTrace;
  /** Releases the GPU kernels; later calls reject with "invalid-argument". Safe to call twice. */
  free(): void;
}

function floats(values: Float32Array | ArrayLike<number>, what: string): Float32Array {
  if (values instanceof Float32Array) return values;
  if (values === null || typeof values !== "object" || typeof values.length !== "number") {
    throw new FuselmError("invalid-argument", `${what} must be a Float32Array or an array of numbers`);
  }
  return Float32Array.from(values);
}

class LocalSimulation implements Simulation {
  #raw: wasm.Simulation | undefined;
  readonly info: SimulationInfo;

  constructor(raw: wasm.Simulation) {
    this.#raw = raw;
    this.info = raw.info();
  }

  #live(): wasm.Simulation {
    if (this.#raw === undefined) throw new FuselmError("invalid-argument", "this simulation was freed");
    return this.#raw;
  }

  async evaluate(params: Float32Array | ArrayLike<number>, options?: EvaluateOptions): Promise<PopulationResult> {
    try {
      const raw = await this.#live().evaluate(floats(params, "params"), options);
      return {
        totalReward: raw.totalReward,
        steps: raw.steps,
        strategy: raw.strategy,
        dispatches: raw.dispatches,
        elapsedMs: raw.elapsedMs,
      };
    } catch (e) {
      throw toFuselmError(e);
    }
  }

  async evolve(theta: Float32Array | ArrayLike<number>, options: EvolveOptions): Promise<EvolutionResult> {
    try {
      const raw = await this.#live().evolve(floats(theta, "theta"), options);
      return { ...raw, theta: Float32Array.from(raw.theta) };
    } catch (e) {
      throw toFuselmError(e);
    }
  }

  trace(params: Float32Array | ArrayLike<number>, options: { member?: number; seed?: number } = {}): EpisodeTrace {
    try {
      return this.#live().trace(floats(params, "params"), options.member, options.seed);
    } catch (e) {
      throw toFuselmError(e);
    }
  }

  free(): void {
    this.#raw?.free();
    this.#raw = undefined;
  }
}

/**
 * Compiles the simulation kernels for an environment × policy × population. Rejects with
 * "invalid-argument" for a bad setting or a custom environment whose WGSL does not compile
 * (with the compiler's message), and "webgpu-unavailable" / "no-adapter" without WebGPU.
 */
export async function createSimulation(options: SimulationOptions): Promise<Simulation> {
  try {
    await init();
    return new LocalSimulation(await wasm.createSimulation(options));
  } catch (e) {
    throw toFuselmError(e);
  }
}

/** `createSimulation` + one `evaluate` + `free`: every member's fitness for `params`. */
export async function evaluatePopulation(
  options: SimulationOptions & EvaluateOptions & { params: Float32Array | ArrayLike<number> },
): Promise<PopulationResult> {
  const { params, strategy, seed, ...spec } = options;
  const sim = await createSimulation({ ...spec, seed });
  try {
    return await sim.evaluate(params, { strategy });
  } finally {
    sim.free();
  }
}

/**
 * The simulation benchmark (the native `fuselm sim-bench`): generations per second of the fused
 * and unfused strategies side by side on this device, over populations × episode lengths, with
 * a markdown table.
 */
export async function simBench(options?: SimBenchOptions): Promise<SimBenchReport> {
  try {
    await init();
    return await wasm.simBench(options);
  } catch (e) {
    throw toFuselmError(e);
  }
}
