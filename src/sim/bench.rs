//! The simulation benchmark (`fuselm sim-bench`): generations per second — one generation is
//! uploading a population's parameters, evaluating every member's episode and reading the
//! fitness back — for both strategies side by side in one process on one device, over
//! populations × episode lengths. Medians of `runs` after one warm-up, with min and max.

use super::env::Env;
use super::gpu::{PopulationEvaluator, SimStrategy};
use super::policy::Policy;
use super::spec::PopulationSpec;
use crate::clock::now_seconds;
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::model::bench::Spread;
use serde::{Deserialize, Serialize};

/// What to measure; `None` fields take the grid.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct SimBenchOptions {
    /// Environments (default: Pendulum, which never terminates early, and Acrobot).
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub envs: Option<Vec<Env>>,
    /// Policy (default: a tanh MLP with 16 hidden units).
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub policy: Option<Policy>,
    /// Populations (default 1,000 and 10,000).
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub populations: Option<Vec<u32>>,
    /// Episode lengths (default 200, 500, 1,500).
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub episode_lengths: Option<Vec<u32>>,
    /// Measured runs per configuration and strategy (default 5).
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub runs: Option<u32>,
}

/// One configuration under one strategy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct SimBenchRow {
    pub env: Env,
    pub policy: Policy,
    pub population: u32,
    pub episode_length: u32,
    pub strategy: SimStrategy,
    pub generations_per_second: Spread,
    /// Member-steps per second at the median (population × mean steps taken / time).
    pub steps_per_second: f64,
    pub dispatches_per_generation: u32,
    /// Median generations/s over the unfused strategy's, same configuration.
    pub speedup_vs_unfused: f64,
    /// Fraction of members whose fitness is identical under both strategies (GPU compilers may
    /// contract the two kernels' arithmetic differently; chaotic dynamics amplify it).
    pub identical_fraction: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct SimBenchReport {
    pub rows: Vec<SimBenchRow>,
    pub markdown: String,
}

/// Runs the grid on `ctx`.
pub async fn sim_bench(ctx: &GpuContext, options: &SimBenchOptions) -> Result<SimBenchReport> {
    let envs = options
        .envs
        .clone()
        .unwrap_or(vec![Env::Pendulum, Env::Acrobot]);
    let policy = options.policy.unwrap_or(Policy::Mlp { hidden: 16 });
    let pops = options.populations.clone().unwrap_or(vec![1000, 10_000]);
    let lens = options
        .episode_lengths
        .clone()
        .unwrap_or(vec![200, 500, 1500]);
    let runs = options.runs.unwrap_or(5).max(1);
    let mut rows = Vec::new();
    for env in &envs {
        for &population in &pops {
            for &episode_length in &lens {
                let spec = PopulationSpec {
                    env: env.clone(),
                    policy,
                    population,
                    episode_length,
                    seed: 1,
                };
                let params = bench_params((population * spec.parameters()) as usize);
                let eval = PopulationEvaluator::new(ctx, &spec).await?;
                let mut results = Vec::new();
                for strategy in [SimStrategy::Unfused, SimStrategy::Fused] {
                    let fitness = eval.evaluate(ctx, &params, 1, strategy).await?; // warm-up
                    let mut times = Vec::new();
                    for run in 0..runs {
                        let t0 = now_seconds();
                        eval.evaluate(ctx, &params, 2 + run, strategy).await?;
                        times.push(now_seconds() - t0);
                    }
                    let steps: u64 = fitness.iter().map(|f| u64::from(f.steps)).sum();
                    let gens = Spread::of(times.iter().map(|t| 1.0 / t).collect());
                    results.push((strategy, gens, steps, fitness, eval.dispatches(strategy)));
                }
                let base = results[0].1.median;
                let same = results[0]
                    .3
                    .iter()
                    .zip(&results[1].3)
                    .filter(|(a, b)| a == b)
                    .count() as f64
                    / f64::from(population);
                for (strategy, gens, steps, _, dispatches) in results {
                    rows.push(SimBenchRow {
                        env: env.clone(),
                        policy,
                        population,
                        episode_length,
                        strategy,
                        steps_per_second: steps as f64 * gens.median,
                        speedup_vs_unfused: gens.median / base,
                        generations_per_second: gens,
                        dispatches_per_generation: dispatches,
                        identical_fraction: same,
                    });
                }
            }
        }
    }
    let mut md = String::from(
        "| env | population | steps | strategy | generations/s (min–max) | member-steps/s | dispatches | × unfused | identical fitness |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in &rows {
        md.push_str(&format!(
            "| {:?} | {} | {} | {:?} | {:.1} ({:.1}–{:.1}) | {:.3e} | {} | {:.1} | {:.1}% |\n",
            r.env,
            r.population,
            r.episode_length,
            r.strategy,
            r.generations_per_second.median,
            r.generations_per_second.min,
            r.generations_per_second.max,
            r.steps_per_second,
            r.dispatches_per_generation,
            r.speedup_vs_unfused,
            r.identical_fraction * 100.0,
        ));
    }
    Ok(SimBenchReport { rows, markdown: md })
}

/// Deterministic parameters in [-1, 1).
fn bench_params(n: usize) -> Vec<f32> {
    let mut s = 0x9e37_79b9u32;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / 8_388_608.0 - 1.0
        })
        .collect()
}
