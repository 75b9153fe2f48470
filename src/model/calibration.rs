//! The planner's optional calibration: a short greedy generation with every strategy that can
//! win on this model and device (each registered strategy says whether it can:
//! `GenerationStrategy::calibrates`), timed end to end (prompt included, as `fuselm bench` ranks
//! them); the fastest becomes the model's default strategy. The result carries a key (crate
//! version, adapter, model shape), so an app can cache it and apply it on a later load
//! ([`GpuModel::use_calibration`]) instead of measuring again.

use super::bench::Spread;
use super::generation::DEFAULT_CHUNK_TOKENS;
use super::gpu_model::{GenerationRequest, GpuModel};
use super::strategy::planner::Planner;
use super::strategy::seam::Pitch;
use super::strategy::Strategy;
use crate::error::{FuselmError, Result};
use crate::sampling::SamplingOptions;
use serde::{Deserialize, Serialize};

/// Prompt tokens of a calibration run (ids 1..=8: any vocabulary has them).
const PROMPT_TOKENS: u32 = 8;

/// Settings of [`GpuModel::calibrate`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct CalibrateOptions {
    /// New tokens per timed generation, 1–256 (default 32, 8 on a software adapter; fewer if the
    /// context is shorter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub tokens: Option<u32>,
    /// Timed generations per strategy after one warm-up, 1–10 (default 3, 1 on a software
    /// adapter; the median counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub runs: Option<u32>,
}

/// One strategy's timing in a calibration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct CalibrationRun {
    pub strategy: Strategy,
    /// New tokens per second from submitting the prompt to the last token on the host.
    pub end_to_end_tokens_per_second: Spread,
}

/// What a calibration measured and chose; serialisable, so it can be cached and applied again
/// with [`GpuModel::use_calibration`] (`model.useCalibration` in TypeScript).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct Calibration {
    /// Which device and model this holds for: the crate version, the adapter and the model's
    /// shape and context. A calibration applies only where the key is the same.
    pub key: String,
    /// The fastest strategy: the model's default from now on.
    pub strategy: Strategy,
    /// Why, in one sentence (also `model.info.strategyReason` from now on).
    pub reason: String,
    pub prompt_tokens: u32,
    pub new_tokens: u32,
    pub runs: u32,
    /// The strategies timed, fastest first.
    pub results: Vec<CalibrationRun>,
    /// Strategies not timed, and why.
    pub skipped: Vec<String>,
    /// Whether this came from a cache instead of being measured now (set by the TypeScript
    /// `calibrate({ cache: true })`).
    #[serde(default)]
    pub from_cache: bool,
}

impl GpuModel {
    /// The key a calibration of this model on this adapter carries.
    pub fn calibration_key(&self) -> String {
        let m = &self.shared;
        let id = &m.ctx.identity;
        let c = &m.config;
        format!(
            "fuselm {} | {} {} {} {} | {} L{} d{} ff{} h{}/{} v{} | {} B/token | ctx {}",
            env!("CARGO_PKG_VERSION"),
            id.backend,
            id.vendor,
            id.device,
            id.description,
            c.arch,
            c.n_layers,
            c.n_embd,
            c.n_ff,
            c.n_head,
            c.n_head_kv,
            c.vocab_size,
            m.decode_weight_bytes(),
            m.acts.n_ctx
        )
    }

    /// Times a short greedy generation with every strategy that can win here and makes the
    /// fastest (end to end) the default strategy. Takes about `(runs + 1) × tokens` tokens of
    /// generation per strategy. The megakernel is skipped where a token streams far more
    /// weights than the planner's limit for it; a strategy timed but not chosen gives back
    /// what it built for the timing (the megakernel's arena).
    pub async fn calibrate(&mut self, options: &CalibrateOptions) -> Result<Calibration> {
        // A software (CPU) adapter takes 10–400 ms per step of even a toy model (SwiftShader;
        // the fused strategy's 15 dispatches of a 3-layer model ~400 ms): GPU-sized defaults
        // would time for minutes. Its ranking is not close either way.
        let software = self.shared.ctx.identity.is_software;
        let runs = options.runs.unwrap_or(if software { 1 } else { 3 });
        if !(1..=10).contains(&runs) {
            return Err(FuselmError::InvalidArgument(format!(
                "calibration runs must be 1–10, got {runs}"
            )));
        }
        let asked = options.tokens.unwrap_or(if software { 8 } else { 32 });
        if !(1..=256).contains(&asked) {
            return Err(FuselmError::InvalidArgument(format!(
                "calibration tokens must be 1–256, got {asked}"
            )));
        }
        let n_ctx = self.n_ctx();
        if n_ctx < PROMPT_TOKENS + 1 {
            return Err(FuselmError::InvalidArgument(format!(
                "calibration needs a context of at least {} tokens, this model was loaded with {n_ctx}",
                PROMPT_TOKENS + 1
            )));
        }
        let tokens = asked.min(n_ctx - PROMPT_TOKENS);
        let prompt: Vec<u32> = (1..=PROMPT_TOKENS).collect();
        let mut skipped = Vec::new();
        let mut candidates = Vec::new();
        for s in Planner::candidates(&self.strategies, &self.shared) {
            match self.strategies.get_mut(s).calibrates(&self.shared).await {
                Ok(()) => candidates.push(s),
                Err(why) => skipped.push(format!("{}: {why}", s.name())),
            }
        }
        let sampler = SamplingOptions::default().resolve(&[])?;
        let mut results = Vec::new();
        for &strategy in &candidates {
            let request = GenerationRequest {
                prompt: &prompt,
                max_tokens: tokens,
                strategy,
                sampler,
                chunk_tokens: self
                    .strategy(strategy)
                    .timed_chunk(DEFAULT_CHUNK_TOKENS, tokens),
                reuse_prefix: false,
                constraint: None,
                logprobs: None,
            };
            self.generate(&request, &mut |_| true).await?; // warm-up: pipelines, arenas
            let mut e2e = Vec::new();
            for _ in 0..runs {
                let g = self.generate(&request, &mut |_| true).await?;
                let seconds = (g.prefill_seconds + g.decode_seconds).max(1e-9);
                e2e.push(g.tokens.len() as f64 / seconds);
            }
            results.push(CalibrationRun {
                strategy,
                end_to_end_tokens_per_second: Spread::of(e2e),
            });
        }
        let tps = |r: &CalibrationRun| r.end_to_end_tokens_per_second.median;
        results.sort_by(|a, b| tps(b).total_cmp(&tps(a)));
        let best = results[0].strategy;
        let others = results[1..]
            .iter()
            .map(|r| format!("{} {:.0}", r.strategy.name(), tps(r)))
            .collect::<Vec<_>>()
            .join(", ");
        let reason = format!(
            "{}: fastest in this device's calibration ({:.0} tok/s end to end{}{} over \
             {tokens}-token generations)",
            best.name(),
            tps(&results[0]),
            if others.is_empty() { "" } else { " vs " },
            others
        );
        for &s in candidates.iter().filter(|&&s| s != best) {
            // Timed, not chosen: give back what it built (rebuilt if asked for by name).
            if self.strategies.get_mut(s).release() {
                self.kv_caches.retain(|&c| c != Some(s));
                if self.kv_caches.is_empty() {
                    self.kv_caches.push(None);
                    self.kv_valid.clear();
                }
            }
        }
        self.planner.set(best, reason.clone());
        Ok(Calibration {
            key: self.calibration_key(),
            strategy: best,
            reason,
            prompt_tokens: PROMPT_TOKENS,
            new_tokens: tokens,
            runs,
            results,
            skipped,
            from_cache: false,
        })
    }

    /// Makes a saved calibration's strategy the default, if it was measured for this model on
    /// this adapter (the same [`Calibration::key`]) and that strategy can run here.
    pub fn use_calibration(&mut self, c: &Calibration) -> Result<()> {
        let key = self.calibration_key();
        if c.key != key {
            return Err(FuselmError::InvalidArgument(format!(
                "this calibration was measured for \"{}\", not for this model and adapter (\"{key}\")",
                c.key
            )));
        }
        let strategy = self.strategy(c.strategy);
        if strategy.pitch(&self.shared) == Pitch::OptIn {
            return Err(FuselmError::InvalidArgument(format!(
                "calibration chooses among the strategies the planner does; {} is opt-in only",
                c.strategy.name()
            )));
        }
        strategy.check(&self.shared)?;
        self.planner.set(c.strategy, c.reason.clone());
        Ok(())
    }
}
