//! Evolution strategies (OpenAI-ES: antithetic Gaussian perturbations of a mean parameter
//! vector, centred-rank fitness shaping, a gradient step on the mean) with every generation on
//! the GPU: perturb, evaluate (the fused rollout), rank, update — four dispatches per
//! generation, all generations in one compute pass, and only the final mean and the per-generation
//! statistics read back (`shaders/sim_es.wgsl`). [`es_cpu`] is the reference: the same noise
//! (counter-based, regenerated rather than stored) and the same arithmetic.

use super::cpu::episode;
use super::gpu::{storage, PopulationEvaluator};
use super::math::{cos, uniform, PI};
use super::spec::PopulationSpec;
use crate::error::{FuselmError, Result};
use crate::gpu::{read_buffer, GpuContext};
use crate::kernels::pipeline::{compose, Pipeline, Slot};
use crate::sampling::rng::pcg;
use crate::shaders;
use serde::{Deserialize, Serialize};
use wgpu::util::DeviceExt;

/// Settings of an ES run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct EsOptions {
    /// Generations to run.
    pub generations: u32,
    /// Standard deviation of the perturbations.
    pub sigma: f32,
    /// Step size of the mean's update.
    pub learning_rate: f32,
    /// Seed of the perturbations (the episodes use the spec's seed, the same every generation).
    pub seed: u32,
}

/// One generation's population statistics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct GenerationStats {
    pub mean_reward: f32,
    pub best_reward: f32,
    pub best_member: u32,
}

/// The mean after the last generation, and every generation's statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct EsResult {
    pub theta: Vec<f32>,
    pub stats: Vec<GenerationStats>,
}

fn check(spec: &PopulationSpec, theta: &[f32], o: &EsOptions) -> Result<()> {
    spec.validate()?;
    let bad = |m: String| Err(FuselmError::InvalidArgument(m));
    if spec.population < 2 || spec.population % 2 != 0 {
        return bad(format!(
            "ES needs an even population of at least 2 (antithetic pairs), got {}",
            spec.population
        ));
    }
    if theta.len() != spec.parameters() as usize {
        return bad(format!(
            "theta: expected {} parameters, got {}",
            spec.parameters(),
            theta.len()
        ));
    }
    let sigma_ok = o.sigma.is_finite() && o.sigma > 0.0;
    if o.generations == 0 || !sigma_ok || !o.learning_rate.is_finite() {
        return bad("ES: generations >= 1, sigma > 0 and a finite learning rate".into());
    }
    Ok(())
}

/// eps(gen, pair, j) ~ N(0, 1): Box-Muller of two counter-based uniforms (`eps` in sim_es.wgsl).
pub fn eps(seed_g: u32, pair: u32, j: u32) -> f32 {
    let u1 = uniform(seed_g, pair, 2 * j);
    let u2 = uniform(seed_g, pair, 2 * j + 1);
    (-2.0 * (1.0 - u1).ln()).sqrt() * cos(2.0 * PI * u2)
}

/// The CPU reference of [`es_gpu`].
pub fn es_cpu(spec: &PopulationSpec, theta0: &[f32], o: &EsOptions) -> Result<EsResult> {
    spec.validate_cpu()?;
    check(spec, theta0, o)?;
    let (pop, n) = (spec.population as usize, theta0.len());
    let mut theta = theta0.to_vec();
    let mut stats = Vec::new();
    for gen in 0..o.generations {
        let seed_g = pcg(o.seed.wrapping_add(gen));
        let rewards: Vec<f32> = (0..pop)
            .map(|m| {
                let sign = if m % 2 == 0 { 1.0 } else { -1.0 };
                let p: Vec<f32> = (0..n)
                    .map(|j| theta[j] + sign * o.sigma * eps(seed_g, (m / 2) as u32, j as u32))
                    .collect();
                episode(spec, m as u32, &p).total_reward
            })
            .collect();
        let weights: Vec<f32> = (0..pop)
            .map(|i| {
                let f = rewards[i];
                let rank = (0..pop)
                    .filter(|&k| rewards[k] < f || (rewards[k] == f && k < i))
                    .count();
                rank as f32 / (pop - 1) as f32 - 0.5
            })
            .collect();
        let (mut sum, mut best, mut arg) = (0.0f32, rewards[0], 0);
        for (k, &g) in rewards.iter().enumerate() {
            sum += g;
            if g > best {
                best = g;
                arg = k;
            }
        }
        stats.push(GenerationStats {
            mean_reward: sum / pop as f32,
            best_reward: best,
            best_member: arg as u32,
        });
        for (j, t) in theta.iter_mut().enumerate() {
            let mut g = 0.0f32;
            for q in 0..pop / 2 {
                g += (weights[2 * q] - weights[2 * q + 1]) * eps(seed_g, q as u32, j as u32);
            }
            *t += o.learning_rate / (pop as f32 * o.sigma) * g;
        }
    }
    Ok(EsResult { theta, stats })
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct EsParams {
    seed: u32,
    gen: u32,
    sigma: f32,
    lr: f32,
}

/// Runs `o.generations` generations of ES from `theta0` on the GPU, in one submit (compiles
/// the ES kernels first: keep an [`EsKernels`] to run several times).
pub async fn es_gpu(
    ctx: &GpuContext,
    eval: &PopulationEvaluator,
    theta0: &[f32],
    o: &EsOptions,
) -> Result<EsResult> {
    EsKernels::new(ctx, eval)
        .await?
        .run(ctx, eval, theta0, o)
        .await
}

/// The ES kernels (perturb, rank, update) of one [`PopulationEvaluator`]'s spec, compiled.
pub struct EsKernels {
    roles: Vec<Pipeline>,
}

impl EsKernels {
    pub async fn new(ctx: &GpuContext, eval: &PopulationEvaluator) -> Result<Self> {
        let mut slots = vec![Slot::Uniform];
        slots.extend([Slot::ReadWrite; 5]);
        let mut roles = Vec::new();
        for role in 0..3 {
            let source = compose(&[
                &eval.prelude(),
                &format!("const ES_ROLE: u32 = {role}u;\n"),
                shaders::SIM_ES,
            ]);
            roles.push(Pipeline::new(ctx, "sim_es", &source, &slots).await?);
        }
        Ok(Self { roles })
    }

    /// Runs `o.generations` generations from `theta0` in one submit; reads back the final mean
    /// and the per-generation statistics only. `eval` must be the one these kernels were
    /// compiled for.
    pub async fn run(
        &self,
        ctx: &GpuContext,
        eval: &PopulationEvaluator,
        theta0: &[f32],
        o: &EsOptions,
    ) -> Result<EsResult> {
        let roles = &self.roles;
        let spec = eval.spec();
        check(spec, theta0, o)?;
        let device = &ctx.device;
        let (pop, n) = (u64::from(spec.population), theta0.len() as u64);
        let mut padded = theta0.to_vec();
        padded.resize(padded.len().max(4), 0.0);
        let theta = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("es theta"),
            contents: bytemuck::cast_slice(&padded),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        });
        let params = storage(ctx, "es population", pop * n * 4);
        let fitness = storage(ctx, "es fitness", pop * 8);
        let weights = storage(ctx, "es weights", pop * 4);
        let stats = storage(ctx, "es stats", u64::from(o.generations) * 16);
        // The population's size against the binding limit: checked by PopulationEvaluator::new.
        let rollout = eval.bind_rollout(ctx, spec.seed, &params, &fitness)?;
        let members = PopulationEvaluator::groups(ctx, pop)?;
        let per_param = PopulationEvaluator::groups(ctx, n)?;
        let mut calls = Vec::new();
        for gen in 0..o.generations {
            let p = EsParams {
                seed: o.seed,
                gen,
                sigma: o.sigma,
                lr: o.learning_rate,
            };
            let bufs = [&theta, &params, &fitness, &weights, &stats];
            calls.push([
                roles[0].bind(ctx, &p, &bufs)?,
                roles[1].bind(ctx, &p, &bufs)?,
                roles[2].bind(ctx, &p, &bufs)?,
            ]);
        }
        let mut encoder = device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for [perturb, rank, update] in &calls {
                perturb.dispatch(&mut pass, members);
                rollout.dispatch(&mut pass, members);
                rank.dispatch(&mut pass, members);
                update.dispatch(&mut pass, per_param);
            }
        }
        ctx.queue.submit([encoder.finish()]);
        let t = read_buffer(device, &ctx.queue, &theta, 0, n * 4).await?;
        let s = read_buffer(device, &ctx.queue, &stats, 0, u64::from(o.generations) * 16).await?;
        // Freed now, not when a browser's garbage collector gets to them.
        for b in [&theta, &params, &fitness, &weights, &stats] {
            b.destroy();
        }
        let s: &[f32] = bytemuck::cast_slice(&s);
        Ok(EsResult {
            theta: bytemuck::cast_slice(&t).to_vec(),
            stats: s
                .chunks(4)
                .map(|v| GenerationStats {
                    mean_reward: v[0],
                    best_reward: v[1],
                    best_member: v[2] as u32,
                })
                .collect(),
        })
    }
}
