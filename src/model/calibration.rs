//! The planner's optional calibration: a short greedy generation with every strategy that can
//! win on this model and device, timed end to end (prompt included, as `fuselm bench` ranks
//! them); the fastest becomes the model's default strategy. The result carries a key (crate
//! version, adapter, model shape), so an app can cache it and apply it on a later load
//! ([`GpuModel::use_calibration`]) instead of measuring again.

use super::bench::Spread;
use super::generation::{GenerationRequest, Strategy};
use super::gpu_model::GpuModel;
use crate::error::{FuselmError, Result};
use crate::sampling::SamplingOptions;
use serde::{Deserialize, Serialize};

/// Prompt tokens of a calibration run (ids 1..=8: any vocabulary has them).
const PROMPT_TOKENS: u32 = 8;
/// The megakernel is not timed while a token streams more than this many times its planner
/// limit of weights: it loses by an order of magnitude there (SmolLM2 on the H200: 27 tok/s vs
/// fused 1,331), and timing it would copy the weights into its arena.
const MEGAKERNEL_TIMING_FACTOR: u64 = 8;

/// Settings of [`GpuModel::calibrate`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct CalibrateOptions {
    /// New tokens per timed generation, 1–256 (default 32; fewer if the context is shorter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub tokens: Option<u32>,
    /// Timed generations per strategy after one warm-up, 1–10 (default 3; the median counts).
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
        let id = &self.ctx.identity;
        let c = &self.config;
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
            self.decode_weight_bytes(),
            self.acts.n_ctx
        )
    }

    /// Times a short greedy generation with every strategy that can win here and makes the
    /// fastest (end to end) the default strategy. Takes about `(runs + 1) × tokens` tokens of
    /// generation per strategy. The megakernel is skipped where a token streams far more
    /// weights than the planner's limit for it; if it is timed but not chosen, its arena is
    /// freed again.
    pub async fn calibrate(&mut self, options: &CalibrateOptions) -> Result<Calibration> {
        let runs = options.runs.unwrap_or(3);
        if !(1..=10).contains(&runs) {
            return Err(FuselmError::InvalidArgument(format!(
                "calibration runs must be 1–10, got {runs}"
            )));
        }
        let asked = options.tokens.unwrap_or(32);
        if !(1..=256).contains(&asked) {
            return Err(FuselmError::InvalidArgument(format!(
                "calibration tokens must be 1–256, got {asked}"
            )));
        }
        let n_ctx = self.acts.n_ctx;
        if n_ctx < PROMPT_TOKENS + 1 {
            return Err(FuselmError::InvalidArgument(format!(
                "calibration needs a context of at least {} tokens, this model was loaded with {n_ctx}",
                PROMPT_TOKENS + 1
            )));
        }
        let tokens = asked.min(n_ctx - PROMPT_TOKENS);
        let prompt: Vec<u32> = (1..=PROMPT_TOKENS).collect();
        let mut skipped = Vec::new();
        let mut candidates = vec![Strategy::Unfused];
        match self.fused_available() {
            Ok(()) => candidates.push(Strategy::Fused),
            Err(e) => skipped.push(format!("fused: {e}")),
        }
        let limit = self.megakernel_limit();
        let bytes = self.decode_weight_bytes();
        if bytes > MEGAKERNEL_TIMING_FACTOR * limit {
            skipped.push(format!(
                "megakernel: a token streams {} KB of weights, far beyond where one workgroup \
                 can win (the planner's limit here is {} KB)",
                bytes / 1000,
                limit / 1000
            ));
        } else {
            match self.megakernel_available().await {
                Ok(()) => candidates.push(Strategy::Megakernel),
                Err(e) => skipped.push(format!("megakernel: {e}")),
            }
        }
        let sampler = SamplingOptions::default().resolve(&[])?;
        let mut results = Vec::new();
        for strategy in candidates {
            let request = GenerationRequest {
                prompt: &prompt,
                max_tokens: tokens,
                strategy,
                sampler,
                chunk_tokens: if strategy == Strategy::Megakernel {
                    tokens
                } else {
                    super::generation::DEFAULT_CHUNK_TOKENS
                },
                reuse_prefix: false,
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
        if best != Strategy::Megakernel && matches!(self.mega, Some(Ok(_))) {
            // Timed, not chosen: give its arena back (it is rebuilt if asked for by name).
            self.mega = None;
            self.kv_in_mega = false;
            self.kv_valid.clear();
        }
        self.calibrated = Some((best, reason.clone()));
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
        match c.strategy {
            Strategy::MegakernelGrid => {
                return Err(FuselmError::InvalidArgument(
                    "calibration chooses among fused, unfused and megakernel; the grid \
                     megakernel is opt-in only"
                        .into(),
                ))
            }
            Strategy::Unfused => {}
            Strategy::Fused => self.fused_available()?,
            Strategy::Megakernel => {
                super::megakernel::mega_shape(&self.config, self.acts.n_ctx)?;
                if let Some(Err(e)) = &self.mega {
                    return Err(super::generation::replay_mega(e));
                }
            }
        }
        self.calibrated = Some((c.strategy, c.reason.clone()));
        Ok(())
    }
}
