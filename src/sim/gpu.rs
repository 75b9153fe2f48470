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

use super::env::Env;
use super::fitness::Fitness;
use super::policy::Policy;
use super::spec::PopulationSpec;
use crate::error::{FuselmError, Result};
use crate::gpu::GpuContext;
use crate::gpu::{StagedRead, StagingPool};
use crate::kernels::dispatch::{grid, max_groups};
use crate::kernels::pipeline::{compose, Bound, Pipeline, Slot};
use crate::shaders;
use serde::{Deserialize, Serialize};

/// How a population is stepped on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
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
    /// The population's buffers, allocated once: `evaluate` writes the parameters into them
    /// (one `writeBuffer`) instead of creating buffers per call, which browsers free only when
    /// their garbage collector runs.
    buffers: Buffers,
}

struct Buffers {
    params: wgpu::Buffer,
    fitness: wgpu::Buffer,
    /// The unfused strategy's running state, `STRIDE` floats per member.
    state: wgpu::Buffer,
    /// The kernels' uniforms (`SimParams`), written per call: `first` = 1 (the fused rollout,
    /// the unfused first step) and `first` = 0 (the other steps).
    uniform_first: wgpu::Buffer,
    uniform_rest: wgpu::Buffer,
    /// Staging buffers for the fitness readback, reused across calls.
    staging: StagingPool,
    /// The parameters' upload buffer (MAP_WRITE), mapped while it sits here: a call takes it,
    /// writes the parameters into it, unmaps it and copies it into `params` with its work,
    /// then maps it again; the map's completion puts it back. A call that finds it away (an
    /// overlapping call, or a map not completed yet) uploads with `write_buffer` instead.
    /// Through Dawn `write_buffer` moved 6.5 MB (Acrobot, 10,000 members) at ~3 GB/s, most of
    /// a generation (bench/NOTES.md).
    upload: std::sync::Arc<std::sync::Mutex<Option<wgpu::Buffer>>>,
    /// The bind groups over these buffers, made once.
    calls: Calls,
}

struct Calls {
    fused: Bound,
    step_first: Bound,
    step_rest: Bound,
}

fn env_source(env: &Env) -> &str {
    match env {
        Env::CartPole => shaders::SIM_ENV_CARTPOLE,
        Env::Acrobot => shaders::SIM_ENV_ACROBOT,
        Env::MountainCar => shaders::SIM_ENV_MOUNTAIN_CAR,
        Env::Pendulum => shaders::SIM_ENV_PENDULUM,
        Env::Rastrigin { .. } => shaders::SIM_ENV_RASTRIGIN,
        Env::Custom(c) => &c.wgsl,
    }
}

impl PopulationEvaluator {
    /// Compiles both strategies' kernels for `spec` (the seed is taken per call).
    pub async fn new(ctx: &GpuContext, spec: &PopulationSpec) -> Result<Self> {
        spec.validate()?;
        let hidden = match spec.policy {
            Policy::Mlp { hidden } => hidden,
            Policy::Linear | Policy::Recurrent { .. } => 0,
        };
        let rnn = spec.policy.recurrent_len();
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
const STATE_LEN: u32 = {state_len}u;
const OBS_LEN: u32 = {obs_len}u;
const OUT_LEN: u32 = {out_len}u;
const STRIDE: u32 = {stride}u;
const RNN: u32 = {rnn}u;
const RNN_LEN: u32 = {rnn_len}u;
const ACTION_SCALE: f32 = {scale:?};
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
            state_len = spec.env.state_len(),
            obs_len = spec.env.obs_len(),
            out_len = spec.env.outputs().max(1),
            stride = spec.env.state_len() + 4 + rnn,
            rnn_len = rnn.max(1),
            scale = spec.env.action_scale(),
        );
        let source = |kernel: &str| {
            compose(&[
                &prelude,
                shaders::ROPE_MATH,
                shaders::SIM_COMMON,
                kernel,
                env_source(&spec.env),
                shaders::SIM_POLICY,
            ])
        };
        let slots = [Slot::Uniform, Slot::Read, Slot::ReadWrite];
        // A user's environment is compiled with WebGPU's runtime checks (bounded loops, clamped
        // indexing): it is not ours to trust. Its compile errors are the caller's to fix.
        let custom = matches!(spec.env, Env::Custom(_));
        let build = |label: &'static str, kernel: &'static str| {
            let source = source(kernel);
            async move {
                let built = if custom {
                    Pipeline::new_checked(ctx, label, &source, &slots).await
                } else {
                    Pipeline::new(ctx, label, &source, &slots).await
                };
                built.map_err(|e| match (custom, e) {
                    (true, FuselmError::Gpu(m)) => FuselmError::InvalidArgument(format!(
                        "custom environment: the WGSL does not compile with the simulation kernels: {m}"
                    )),
                    (_, e) => e,
                })
            }
        };
        let pop = u64::from(spec.population);
        let bytes = pop * u64::from(spec.parameters()) * 4;
        let limit = ctx.device.limits().max_storage_buffer_binding_size;
        if bytes > limit {
            return Err(FuselmError::LimitExceeded {
                limit: "maxStorageBufferBindingSize (population × parameters)",
                needed: bytes,
                available: limit,
            });
        }
        let params = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sim params"),
            size: bytes.max(16).div_ceil(16) * 16,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let upload = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sim params upload"),
            size: params.size(),
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        let stride = u64::from(spec.env.state_len() + 4 + spec.policy.recurrent_len());
        let uniform = |label| {
            ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: std::mem::size_of::<SimParams>() as u64,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        let (uniform_first, uniform_rest) = (uniform("sim first"), uniform("sim rest"));
        let fitness = storage(ctx, "sim fitness", pop * 8);
        let state = storage(ctx, "sim state", pop * stride * 4);
        let fused = build("sim_rollout", shaders::SIM_ROLLOUT).await?;
        let step = build("sim_step", shaders::SIM_STEP).await?;
        let calls = Calls {
            fused: fused.bind_plain(ctx, &[&uniform_first, &params, &fitness])?,
            step_first: step.bind_plain(ctx, &[&uniform_first, &params, &state])?,
            step_rest: step.bind_plain(ctx, &[&uniform_rest, &params, &state])?,
        };
        // One code path for both targets: natively the map callback must be Send; on wasm32
        // (one thread, no atomics) wgpu's handles are not Send, and the Arc/Mutex cost nothing.
        #[allow(clippy::arc_with_non_send_sync)]
        let upload = std::sync::Arc::new(std::sync::Mutex::new(Some(upload)));
        Ok(Self {
            spec: spec.clone(),
            prelude: prelude.clone(),
            fused,
            buffers: Buffers {
                params,
                fitness,
                state,
                upload,
                uniform_first,
                uniform_rest,
                staging: StagingPool::default(),
                calls,
            },
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
    ) -> Result<crate::kernels::pipeline::Bound> {
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
        match (strategy, &self.spec.env) {
            (SimStrategy::Fused, _) | (_, Env::Rastrigin { .. }) => 1,
            (SimStrategy::Unfused, _) => self.spec.episode_length,
        }
    }

    /// Every member's fitness for `params` (`population × parameters` floats) and `seed`.
    /// Calls share the evaluator's buffers: overlapping calls from one thread are safe (each
    /// writes and submits without awaiting in between); from several threads, use one
    /// evaluator per thread.
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
        let bytes: &[u8] = bytemuck::cast_slice(params);
        let upload = self.buffers.upload.lock().ok().and_then(|mut u| u.take());
        let mut encoder = device.create_command_encoder(&Default::default());
        match &upload {
            Some(buffer) => {
                write_mapped(buffer, bytes)?;
                buffer.unmap();
                encoder.copy_buffer_to_buffer(
                    buffer,
                    0,
                    &self.buffers.params,
                    0,
                    bytes.len() as u64,
                );
            }
            None => ctx.queue.write_buffer(&self.buffers.params, 0, bytes),
        }
        let (x, y) = grid(pop.div_ceil(u64::from(WORKGROUP)), max_groups(ctx))?;
        let groups = [x, y, 1];
        let rastrigin = matches!(self.spec.env, Env::Rastrigin { .. });
        let calls = &self.buffers.calls;
        for (uniform, first) in [
            (&self.buffers.uniform_first, 1),
            (&self.buffers.uniform_rest, 0),
        ] {
            let p = SimParams {
                seed,
                first,
                episode: self.spec.episode_length,
                _pad: 0,
            };
            ctx.queue.write_buffer(uniform, 0, bytemuck::bytes_of(&p));
        }
        let (out, out_bytes, stride) = if strategy == SimStrategy::Fused || rastrigin {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            calls.fused.dispatch(&mut pass, groups);
            drop(pass);
            (&self.buffers.fitness, pop * 8, 2)
        } else {
            let stride =
                u64::from(self.spec.env.state_len() + 4 + self.spec.policy.recurrent_len());
            let mut pass = encoder.begin_compute_pass(&Default::default());
            calls.step_first.dispatch(&mut pass, groups);
            for _ in 1..self.spec.episode_length {
                calls.step_rest.dispatch(&mut pass, groups);
            }
            drop(pass);
            (&self.buffers.state, pop * stride * 4, stride as usize)
        };
        // The fitness copy rides in the same submission as the work (one submit, one map).
        // Nothing awaits between the parameters' write and this submission, so calls that
        // overlap on one thread cannot interleave their use of the shared buffers.
        let read = StagedRead::copy_pooled(
            device,
            &self.buffers.staging,
            &mut encoder,
            out,
            0,
            out_bytes,
        );
        let index = ctx.queue.submit([encoder.finish()]);
        if let Some(buffer) = upload {
            // Mapped again once this submission has copied it; then it is ready for the next call.
            let slot = self.buffers.upload.clone();
            let back = buffer.clone();
            buffer.map_async(wgpu::MapMode::Write, .., move |r| {
                if r.is_ok() {
                    if let Ok(mut u) = slot.lock() {
                        *u = Some(back);
                    }
                }
            });
        }
        let raw = read.submitted(index).read(device).await?;
        let words: &[u32] = bytemuck::cast_slice(&raw);
        let bk = self.spec.env.state_len() as usize; // the unfused state's bookkeeping
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
                        total_reward: f32::from_bits(w[bk]),
                        steps: f32::from_bits(w[bk + 1]) as u32,
                    }
                }
            })
            .collect())
    }
}

/// A storage buffer of at least `bytes` (rounded up to 16), readable back.
pub(crate) fn storage(ctx: &GpuContext, label: &str, bytes: u64) -> wgpu::Buffer {
    ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: bytes.max(16).div_ceil(16) * 16,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

/// Writes `bytes` at the start of a buffer mapped for writing.
fn write_mapped(buffer: &wgpu::Buffer, bytes: &[u8]) -> Result<()> {
    let map_err = |e: wgpu::MapRangeError| FuselmError::Gpu(format!("params upload: {e}"));
    #[cfg(target_arch = "wasm32")]
    {
        // One copy from wasm memory into the mapped ArrayBuffer. (A write view would first copy
        // into a temporary buffer on the wasm heap, then into the mapping when dropped.) The
        // range a browser's getMappedRange returns for a buffer mapped for writing is writable.
        let view = buffer
            .get_mapped_range(..bytes.len() as u64)
            .map_err(map_err)?;
        view.as_uint8array().copy_from(bytes);
    }
    #[cfg(not(target_arch = "wasm32"))]
    buffer
        .get_mapped_range_mut(..bytes.len() as u64)
        .map_err(map_err)?
        .copy_from_slice(bytes);
    Ok(())
}
