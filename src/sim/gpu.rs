//! The simulation kernels' host side: [`PopulationEvaluator`] compiles an environment × policy
//! pair once and evaluates populations with either strategy.
//!
//! - `fused` (`shaders/sim_rollout.wgsl`): one dispatch; each invocation runs one member's
//!   whole episode.
//! - `unfused` (`shaders/sim_step.wgsl`): `episode_length` dispatches, each advancing every
//!   member by one step (state kept in a buffer between them), recorded into one compute pass
//!   and one submit — the way a framework steps a vectorised environment, minus its Python.
//!
//! Both read back only the fitness. Both use the same environment, policy and arithmetic, so
//! they give identical results; the CPU reference (`sim::evaluate_cpu`) agrees within rounding
//! (tests/sim.rs states the tolerance).

use super::{Env, Fitness, Policy, PopulationSpec};
use crate::error::{FuselmError, Result};
use crate::gpu::read_buffer;
use crate::gpu::GpuContext;
use crate::kernels::{compose, grid, max_groups, Pipeline, Slot};
use crate::shaders;
use serde::{Deserialize, Serialize};
use wgpu::util::DeviceExt;

/// How a population is stepped on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SimStrategy {
    /// One dispatch per step for the whole population.
    Unfused,
    /// One dispatch for the whole episode of the whole population.
    Fused,
}

const WORKGROUP: u32 = 64;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct SimParams {
    seed: u32,
    first: u32,
    /// Steps per episode: a uniform, not a WGSL constant, so a compiler cannot unroll the
    /// episode loop (SwiftShader's LLVM did, and ran Chromium's GPU process out of memory).
    episode: u32,
    _pad: u32,
}

/// An environment × policy × population size, compiled.
pub struct PopulationEvaluator {
    spec: PopulationSpec,
    /// The constants every simulation kernel of this spec starts with.
    prelude: String,
    fused: Pipeline,
    step: Pipeline,
}

fn env_source(env: Env) -> &'static str {
    match env {
        Env::CartPole => shaders::SIM_ENV_CARTPOLE,
        Env::Acrobot => shaders::SIM_ENV_ACROBOT,
        Env::MountainCar => shaders::SIM_ENV_MOUNTAIN_CAR,
        Env::Pendulum => shaders::SIM_ENV_PENDULUM,
        Env::Rastrigin { .. } => shaders::SIM_ENV_RASTRIGIN,
    }
}

impl PopulationEvaluator {
    /// Compiles both strategies' kernels for `spec` (the seed is taken per call).
    pub async fn new(ctx: &GpuContext, spec: &PopulationSpec) -> Result<Self> {
        spec.validate()?;
        let hidden = match spec.policy {
            Policy::Linear => 0,
            Policy::Mlp { hidden } => hidden,
        };
        // Parameters kept in registers for the whole episode when they are few (the policy's;
        // Rastrigin's point is read where it is).
        let private = spec.parameters() <= 256 && !matches!(spec.env, Env::Rastrigin { .. });
        let prelude = format!(
            "const POPULATION: u32 = {pop}u;
const N_PARAMS: u32 = {np}u;
const N_OBS: u32 = {obs}u;
const N_OUT: u32 = {out}u;
const HIDDEN: u32 = {hidden}u;
const HIDDEN_LEN: u32 = {hidden_len}u;
const DISCRETE: bool = {discrete};
const RASTRIGIN: bool = {rastrigin};
const PRIVATE_PARAMS: bool = {private};
const PP_LEN: u32 = {pp_len}u;
",
            pop = spec.population,
            np = spec.parameters(),
            obs = spec.env.observations(),
            out = spec.env.outputs(),
            hidden_len = hidden.max(1),
            discrete = spec.env.discrete(),
            rastrigin = matches!(spec.env, Env::Rastrigin { .. }),
            private = private,
            pp_len = if private { spec.parameters() } else { 1 },
        );
        let source = |kernel: &str| {
            compose(&[
                &prelude,
                shaders::ROPE_MATH,
                shaders::SIM_COMMON,
                kernel,
                env_source(spec.env),
                shaders::SIM_POLICY,
            ])
        };
        let slots = [Slot::Uniform, Slot::Read, Slot::ReadWrite];
        Ok(Self {
            spec: spec.clone(),
            prelude: prelude.clone(),
            fused: Pipeline::new(ctx, "sim_rollout", &source(shaders::SIM_ROLLOUT), &slots).await?,
            step: Pipeline::new(ctx, "sim_step", &source(shaders::SIM_STEP), &slots).await?,
        })
    }

    pub fn spec(&self) -> &PopulationSpec {
        &self.spec
    }

    /// The WGSL every simulation kernel of this spec starts with (constants, shared helpers).
    pub(crate) fn prelude(&self) -> String {
        compose(&[&self.prelude, shaders::ROPE_MATH, shaders::SIM_COMMON])
    }

    /// The fused rollout bound to caller-owned buffers (the ES loop's).
    pub(crate) fn bind_rollout(
        &self,
        ctx: &GpuContext,
        seed: u32,
        params: &wgpu::Buffer,
        fitness: &wgpu::Buffer,
    ) -> Result<crate::kernels::Bound> {
        self.fused.bind(
            ctx,
            &SimParams {
                seed,
                first: 1,
                episode: self.spec.episode_length,
                _pad: 0,
            },
            &[params, fitness],
        )
    }

    /// The workgroup grid covering `n` invocations of 64.
    pub(crate) fn groups(ctx: &GpuContext, n: u64) -> Result<[u32; 3]> {
        let (x, y) = grid(n.div_ceil(u64::from(WORKGROUP)), max_groups(ctx))?;
        Ok([x, y, 1])
    }

    /// Dispatches one evaluation records (fused: 1; unfused: one per step).
    pub fn dispatches(&self, strategy: SimStrategy) -> u32 {
        match (strategy, self.spec.env) {
            (SimStrategy::Fused, _) | (_, Env::Rastrigin { .. }) => 1,
            (SimStrategy::Unfused, _) => self.spec.episode_length,
        }
    }

    /// Every member's fitness for `params` (`population × parameters` floats) and `seed`.
    pub async fn evaluate(
        &self,
        ctx: &GpuContext,
        params: &[f32],
        seed: u32,
        strategy: SimStrategy,
    ) -> Result<Vec<Fitness>> {
        self.spec.check_params(params)?;
        let device = &ctx.device;
        let pop = u64::from(self.spec.population);
        let bytes = (params.len() as u64 * 4).max(16);
        let limit = device.limits().max_storage_buffer_binding_size;
        if bytes > limit {
            return Err(FuselmError::LimitExceeded {
                limit: "maxStorageBufferBindingSize (population × parameters)",
                needed: bytes,
                available: limit,
            });
        }
        let mut padded = params.to_vec();
        padded.resize(padded.len().max(4), 0.0);
        let params_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("sim params"),
            contents: bytemuck::cast_slice(&padded),
            usage: wgpu::BufferUsages::STORAGE,
        });
        let (x, y) = grid(pop.div_ceil(u64::from(WORKGROUP)), max_groups(ctx))?;
        let groups = [x, y, 1];
        let rastrigin = matches!(self.spec.env, Env::Rastrigin { .. });
        let mut encoder = device.create_command_encoder(&Default::default());
        let (out, out_bytes, stride) = if strategy == SimStrategy::Fused || rastrigin {
            let fitness = storage(ctx, "sim fitness", pop * 8);
            let bound = self.fused.bind(
                ctx,
                &SimParams {
                    seed,
                    first: 1,
                    episode: self.spec.episode_length,
                    _pad: 0,
                },
                &[&params_buf, &fitness],
            )?;
            let mut pass = encoder.begin_compute_pass(&Default::default());
            bound.dispatch(&mut pass, groups);
            drop(pass);
            (fitness, pop * 8, 2)
        } else {
            let state = storage(ctx, "sim state", pop * 32);
            let first = self.step.bind(
                ctx,
                &SimParams {
                    seed,
                    first: 1,
                    episode: self.spec.episode_length,
                    _pad: 0,
                },
                &[&params_buf, &state],
            )?;
            let rest = self.step.bind(
                ctx,
                &SimParams {
                    seed,
                    first: 0,
                    episode: self.spec.episode_length,
                    _pad: 0,
                },
                &[&params_buf, &state],
            )?;
            let mut pass = encoder.begin_compute_pass(&Default::default());
            first.dispatch(&mut pass, groups);
            for _ in 1..self.spec.episode_length {
                rest.dispatch(&mut pass, groups);
            }
            drop(pass);
            (state, pop * 32, 8)
        };
        ctx.queue.submit([encoder.finish()]);
        let raw = read_buffer(device, &ctx.queue, &out, 0, out_bytes).await?;
        let words: &[u32] = bytemuck::cast_slice(&raw);
        Ok(words
            .chunks(stride)
            .map(|w| {
                if stride == 2 {
                    Fitness {
                        total_reward: f32::from_bits(w[0]),
                        steps: w[1],
                    }
                } else {
                    Fitness {
                        total_reward: f32::from_bits(w[4]),
                        steps: f32::from_bits(w[5]) as u32,
                    }
                }
            })
            .collect())
    }
}

fn storage(ctx: &GpuContext, label: &str, bytes: u64) -> wgpu::Buffer {
    ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: bytes.max(16).div_ceil(16) * 16,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}
