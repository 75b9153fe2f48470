//! `createSimulation` / `Simulation` and `simBench`: the simulation API ([`crate::sim`]) for JS.
//!
//! A `Simulation` owns its GPU context and the compiled kernels of one environment × policy ×
//! population, so a page can evaluate and evolve many times without recompiling. Its methods
//! borrow nothing across awaits (the state lives in an `Rc`), so calling `free()` while a promise
//! is pending is safe: the kernels are dropped when the last call ends.

use super::convert::{from_js, to_js, to_js_error};
use crate::error::FuselmError;
use crate::gpu::GpuContext;
use crate::sim::bench::{SimBenchOptions, SimBenchReport};
use crate::sim::es::{EsKernels, EsOptions, EsResult};
use crate::sim::gpu::{PopulationEvaluator, SimStrategy};
use crate::sim::{trace_cpu, Env, EpisodeTrace, Policy, PopulationSpec};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use tsify::Ts;
use wasm_bindgen::prelude::*;

/// What `createSimulation` compiles.
#[derive(Debug, Clone, Serialize, Deserialize, tsify::Tsify)]
#[serde(rename_all = "camelCase")]
pub struct SimulationOptions {
    /// A built-in environment (`{ name: "cart-pole" }`, `"acrobot"`, `"mountain-car"`,
    /// `"pendulum"`, `{ name: "rastrigin", dim }`) or `{ name: "custom", wgsl, stateSize,
    /// observations, actions? }` (README: "Your own environment").
    pub env: Env,
    /// Default: linear.
    #[tsify(optional)]
    pub policy: Option<Policy>,
    /// Members evaluated together.
    pub population: u32,
    /// Steps per episode at most (default 500; Rastrigin: 1).
    #[tsify(optional)]
    pub episode_length: Option<u32>,
    /// Seed of the initial states (default 0); `evaluate` may override it per call.
    #[tsify(optional)]
    pub seed: Option<u32>,
}

/// Settings of one `evaluate` call.
#[derive(Debug, Clone, Default, Serialize, Deserialize, tsify::Tsify)]
#[serde(rename_all = "camelCase")]
pub struct EvaluateOptions {
    /// Seed of the initial states (default: the simulation's).
    #[tsify(optional)]
    pub seed: Option<u32>,
    /// Default "fused": one dispatch for the whole episode of the whole population.
    #[tsify(optional)]
    pub strategy: Option<SimStrategy>,
}

/// Every member's fitness (the raw form). The arrays cross into JS as typed arrays in one copy
/// each: as plain arrays (one JS number per member) they cost ~1 ms per call at 10,000 members
/// through Dawn in Node, about as much as the generation itself (bench/NOTES.md).
#[derive(Debug, Clone, Serialize, Deserialize, tsify::Tsify)]
#[serde(rename_all = "camelCase")]
pub struct RawPopulationResult {
    #[serde(with = "serde_wasm_bindgen::preserve")]
    #[tsify(type = "Float32Array")]
    pub total_reward: js_sys::Float32Array,
    #[serde(with = "serde_wasm_bindgen::preserve")]
    #[tsify(type = "Uint32Array")]
    pub steps: js_sys::Uint32Array,
    pub strategy: SimStrategy,
    pub dispatches: u32,
    /// Wall time of the call (upload, GPU work, readback), in milliseconds.
    pub elapsed_ms: f64,
}

/// Settings of an `evolve` call.
#[derive(Debug, Clone, Default, Serialize, Deserialize, tsify::Tsify)]
#[serde(rename_all = "camelCase")]
pub struct EvolveOptions {
    /// Generations to run, all in one GPU submission.
    pub generations: u32,
    /// Standard deviation of the perturbations (default 0.1).
    #[tsify(optional)]
    pub sigma: Option<f32>,
    /// Step size of the mean's update (default 0.03).
    #[tsify(optional)]
    pub learning_rate: Option<f32>,
    /// Seed of the perturbations (default 0). Runs continuing one another should pass
    /// different seeds.
    #[tsify(optional)]
    pub seed: Option<u32>,
}

/// What the compiled simulation is.
#[derive(Debug, Clone, Serialize, Deserialize, tsify::Tsify)]
#[serde(rename_all = "camelCase")]
pub struct SimulationInfo {
    /// Parameters per member (`params` holds `population × parameters` floats).
    pub parameters: u32,
    pub population: u32,
    pub episode_length: u32,
    pub observations: u32,
    /// Policy outputs (discrete actions, or 1).
    pub outputs: u32,
    /// Dispatches one evaluation records under each strategy.
    pub dispatches_fused: u32,
    pub dispatches_unfused: u32,
    /// Whether `trace` can run (every built-in environment; not a custom one).
    pub has_cpu_reference: bool,
}

struct State {
    ctx: GpuContext,
    eval: PopulationEvaluator,
    es: RefCell<Option<Rc<EsKernels>>>,
}

// Written by hand for the reasons given at `MODEL_TS` (web/model.rs): no `[Symbol.dispose]`,
// and typed promises. Keep in step with the methods below.
#[wasm_bindgen(typescript_custom_section)]
const SIMULATION_TS: &str = r#"
/**
 * An environment × policy × population compiled on the GPU (the raw wasm class; the package's
 * `Simulation` wraps it).
 */
export class Simulation {
    private constructor();
    free(): void;
    info(): SimulationInfo;
    evaluate(params: Float32Array, options: EvaluateOptions | null | undefined): Promise<RawPopulationResult>;
    evolve(theta: Float32Array, options: EvolveOptions): Promise<EsResult>;
    trace(params: Float32Array, member: number | null | undefined, seed: number | null | undefined): EpisodeTrace;
}"#;

/// An environment × policy × population compiled on the GPU.
#[wasm_bindgen(skip_typescript)]
pub struct Simulation {
    state: Rc<State>,
}

/// Compiles the simulation kernels for `options`. Rejects with "invalid-argument" for a bad
/// setting or a custom environment that does not compile (the compiler's message included), and
/// the GPU kinds ("webgpu-unavailable", "no-adapter", …) when there is no usable device.
#[wasm_bindgen(js_name = createSimulation)]
pub async fn create_simulation(options: Ts<SimulationOptions>) -> Result<Simulation, JsValue> {
    let o = from_js(Some(options))?.ok_or_else(|| {
        to_js_error(FuselmError::InvalidArgument(
            "createSimulation needs options".into(),
        ))
    })?;
    let rastrigin = matches!(o.env, Env::Rastrigin { .. });
    let spec = PopulationSpec {
        policy: o.policy.unwrap_or(Policy::Linear),
        population: o.population,
        episode_length: o.episode_length.unwrap_or(if rastrigin { 1 } else { 500 }),
        seed: o.seed.unwrap_or(0),
        env: o.env,
    };
    spec.validate().map_err(to_js_error)?;
    let ctx = GpuContext::new().await.map_err(to_js_error)?;
    let eval = PopulationEvaluator::new(&ctx, &spec)
        .await
        .map_err(to_js_error)?;
    Ok(Simulation {
        state: Rc::new(State {
            ctx,
            eval,
            es: RefCell::new(None),
        }),
    })
}

#[wasm_bindgen]
impl Simulation {
    /// Parameter count, sizes and dispatches per evaluation.
    pub fn info(&self) -> Result<Ts<SimulationInfo>, JsValue> {
        let eval = &self.state.eval;
        let spec = eval.spec();
        to_js(&SimulationInfo {
            parameters: spec.parameters(),
            population: spec.population,
            episode_length: spec.episode_length,
            observations: spec.env.observations(),
            outputs: spec.env.outputs(),
            dispatches_fused: eval.dispatches(SimStrategy::Fused),
            dispatches_unfused: eval.dispatches(SimStrategy::Unfused),
            has_cpu_reference: spec.env.has_cpu_reference(),
        })
    }

    /// Every member's fitness for `params` (`population × parameters` floats, member-major).
    pub fn evaluate(
        &self,
        params: Vec<f32>,
        options: Option<Ts<EvaluateOptions>>,
    ) -> js_sys::Promise {
        let state = self.state.clone();
        let options = from_js(options);
        wasm_bindgen_futures::future_to_promise(async move {
            let o = options?.unwrap_or_default();
            let strategy = o.strategy.unwrap_or(SimStrategy::Fused);
            let seed = o.seed.unwrap_or(state.eval.spec().seed);
            let t0 = crate::clock::now_seconds();
            let fitness = state
                .eval
                .evaluate(&state.ctx, &params, seed, strategy)
                .await
                .map_err(to_js_error)?;
            let result = RawPopulationResult {
                total_reward: js_sys::Float32Array::from(
                    &fitness.iter().map(|f| f.total_reward).collect::<Vec<_>>()[..],
                ),
                steps: js_sys::Uint32Array::from(
                    &fitness.iter().map(|f| f.steps).collect::<Vec<_>>()[..],
                ),
                strategy,
                dispatches: state.eval.dispatches(strategy),
                elapsed_ms: (crate::clock::now_seconds() - t0) * 1e3,
            };
            Ok(to_js(&result)?.into())
        })
    }

    /// Runs evolution strategies from the mean `theta` (one member's parameters): every
    /// generation on the GPU in one submission; returns the new mean and each generation's
    /// statistics (`EsResult`). The episodes use the simulation's seed.
    pub fn evolve(&self, theta: Vec<f32>, options: Ts<EvolveOptions>) -> js_sys::Promise {
        let state = self.state.clone();
        let options = from_js(Some(options));
        wasm_bindgen_futures::future_to_promise(async move {
            let o = options?.unwrap_or_default();
            let es = EsOptions {
                generations: o.generations,
                sigma: o.sigma.unwrap_or(0.1),
                learning_rate: o.learning_rate.unwrap_or(0.03),
                seed: o.seed.unwrap_or(0),
            };
            let cached = state.es.borrow().clone();
            let kernels = match cached {
                Some(k) => k,
                None => {
                    let k = Rc::new(
                        EsKernels::new(&state.ctx, &state.eval)
                            .await
                            .map_err(to_js_error)?,
                    );
                    *state.es.borrow_mut() = Some(k.clone());
                    k
                }
            };
            let result: EsResult = kernels
                .run(&state.ctx, &state.eval, &theta, &es)
                .await
                .map_err(to_js_error)?;
            Ok(to_js(&result)?.into())
        })
    }

    /// `member`'s episode step by step with one member's `params`, computed by the CPU
    /// reference (the same dynamics, within the tolerance the tests state): for showing a
    /// policy at work. Rejects for a custom environment, which has no CPU reference.
    pub fn trace(
        &self,
        params: Vec<f32>,
        member: Option<u32>,
        seed: Option<u32>,
    ) -> Result<Ts<EpisodeTrace>, JsValue> {
        let mut spec = self.state.eval.spec().clone();
        if let Some(seed) = seed {
            spec.seed = seed;
        }
        let trace = trace_cpu(&spec, member.unwrap_or(0), &params).map_err(to_js_error)?;
        to_js(&trace)
    }
}

/// The simulation benchmark (the native `fuselm sim-bench`): generations per second of both
/// strategies side by side on this device.
#[wasm_bindgen(js_name = simBench)]
pub async fn sim_bench_js(
    options: Option<Ts<SimBenchOptions>>,
) -> Result<Ts<SimBenchReport>, JsValue> {
    let options = from_js(options)?.unwrap_or_default();
    let ctx = GpuContext::new().await.map_err(to_js_error)?;
    let report = crate::sim::bench::sim_bench(&ctx, &options)
        .await
        .map_err(to_js_error)?;
    to_js(&report)
}
