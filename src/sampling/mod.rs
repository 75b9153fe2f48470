//! Sampling settings and the CPU reference sampler.
//!
//! The order (Hugging Face's): repetition/frequency/presence penalties over a window of recent
//! tokens → temperature → top-k → top-p → min-p → a draw with a counter-based RNG keyed by
//! (seed, position). Temperature 0 is greedy (argmax, ties to the lowest id).
//!
//! **Candidate cap.** Sampling considers the [`MAX_CANDIDATES`] = 128 most likely tokens
//! (after penalties and temperature): top-k is at most 128 and top-p / min-p act within those.
//! This is deliberate: the GPU finds the best 128 of a 49k vocabulary with per-slice bitonic
//! selection and merges (no full sort), and for language-model logits the tail beyond rank 128
//! rarely holds noticeable mass. The GPU sampler (shaders/sample_*.wgsl) performs the same f32
//! operations in the same order as [`reference::sample`].

pub mod logprobs;
pub mod reference;
pub mod rng;

use crate::error::{FuselmError, Result};
use serde::{Deserialize, Serialize};

/// The most tokens sampling ever considers (see the module docs).
pub const MAX_CANDIDATES: u32 = 128;
/// The id the GPU writes for a step whose logits are not all finite (`NONFINITE` in
/// shaders/sampler_params.wgsl): never a vocabulary id; the host turns it into
/// [`FuselmError::Numerical`].
pub const NONFINITE_ID: u32 = 0xffff_fffe;
/// The most stop ids the GPU sampler checks.
pub const MAX_STOP_IDS: usize = 16;
const DEFAULT_PENALTY_LAST_N: u32 = 64;

/// How the next token is chosen. Every field is optional; the defaults give greedy decoding.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct SamplingOptions {
    /// Softmax temperature, >= 0. 0 (default) is greedy: the most likely token, ties to the
    /// lowest id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub temperature: Option<f32>,
    /// Keep the k most likely tokens, 1..=128. Default (or 0): 128.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub top_k: Option<u32>,
    /// Keep the smallest set of most likely tokens whose probability reaches p, in (0, 1].
    /// Default: 1 (off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub top_p: Option<f32>,
    /// Drop tokens less likely than min_p times the most likely one, in [0, 1]. Default: 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub min_p: Option<f32>,
    /// llama.cpp's repetition penalty for tokens in the window (> 0; 1 = off, the default):
    /// positive logits are divided by it, negative ones multiplied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub repetition_penalty: Option<f32>,
    /// Subtracted from a token's logit once per occurrence in the window. Default: 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub frequency_penalty: Option<f32>,
    /// Subtracted once from the logit of every token present in the window. Default: 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub presence_penalty: Option<f32>,
    /// The penalty window: the last N tokens of the sequence (prompt included) before the
    /// position being sampled. Default: 64; 0 disables the penalties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub penalty_last_n: Option<u32>,
    /// The RNG seed (default 0): the same seed gives the same tokens on every strategy and
    /// every adapter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub seed: Option<u64>,
}

/// Resolved settings as the GPU reads them (mirrored by `struct Sampler` in
/// shaders/sampler_params.wgsl).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SamplerParams {
    /// 1/temperature computed in f32 on the host; 0 means greedy.
    pub inv_temperature: f32,
    pub top_k: u32,
    pub top_p: f32,
    pub min_p: f32,
    pub repeat: f32,
    pub inv_repeat: f32,
    pub frequency: f32,
    pub presence: f32,
    pub penalty_last_n: u32,
    /// 1 when the window is non-empty and some penalty differs from its default.
    pub penalties_on: u32,
    pub seed_lo: u32,
    pub seed_hi: u32,
    pub n_stop: u32,
    /// 1 with a constraint: `counts`' top bit marks the ids it disallows
    /// (constraint_mask.wgsl); set by the generation, not by the options.
    pub constrained: u32,
    pub _pad: [u32; 2],
    pub stop_ids: [u32; MAX_STOP_IDS],
}
const _: () = assert!(std::mem::size_of::<SamplerParams>() % 16 == 0);

fn invalid(msg: String) -> FuselmError {
    FuselmError::InvalidArgument(msg)
}

impl SamplingOptions {
    /// Whether these options decode greedily.
    pub fn is_greedy(&self) -> bool {
        self.temperature.unwrap_or(0.0) == 0.0
    }

    /// Validates every setting and resolves the GPU form, with `stop_ids` (at most 16).
    pub fn resolve(&self, stop_ids: &[u32]) -> Result<SamplerParams> {
        let t = self.temperature.unwrap_or(0.0);
        if !t.is_finite() || t < 0.0 {
            return Err(invalid(format!(
                "temperature must be finite and >= 0, got {t}"
            )));
        }
        if t > 0.0 && t < f32::MIN_POSITIVE {
            // 1/t would overflow to infinity in f32.
            return Err(invalid(format!(
                "temperature must be 0 (greedy) or at least {:e}, got {t:e}",
                f32::MIN_POSITIVE
            )));
        }
        let top_k = self.top_k.unwrap_or(0);
        if top_k > MAX_CANDIDATES {
            return Err(invalid(format!(
                "topK must be in 0..={MAX_CANDIDATES} (0 = {MAX_CANDIDATES}), got {top_k}"
            )));
        }
        let top_p = self.top_p.unwrap_or(1.0);
        if !(top_p > 0.0 && top_p <= 1.0) {
            return Err(invalid(format!("topP must be in (0, 1], got {top_p}")));
        }
        let min_p = self.min_p.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&min_p) {
            return Err(invalid(format!("minP must be in [0, 1], got {min_p}")));
        }
        // Bounded so that a penalised logit cannot overflow f32 (which would read as a
        // numerical failure of the model).
        let repeat = self.repetition_penalty.unwrap_or(1.0);
        if !(0.001..=1000.0).contains(&repeat) {
            return Err(invalid(format!(
                "repetitionPenalty must be in [0.001, 1000], got {repeat}"
            )));
        }
        let frequency = self.frequency_penalty.unwrap_or(0.0);
        let presence = self.presence_penalty.unwrap_or(0.0);
        for (name, v) in [
            ("frequencyPenalty", frequency),
            ("presencePenalty", presence),
        ] {
            if !(-1e6..=1e6).contains(&v) {
                return Err(invalid(format!("{name} must be in [-1e6, 1e6], got {v}")));
            }
        }
        if stop_ids.len() > MAX_STOP_IDS {
            return Err(invalid(format!(
                "at most {MAX_STOP_IDS} stop ids, got {}",
                stop_ids.len()
            )));
        }
        let last_n = self.penalty_last_n.unwrap_or(DEFAULT_PENALTY_LAST_N);
        let penalties_on = last_n > 0 && (repeat != 1.0 || frequency != 0.0 || presence != 0.0);
        let seed = self.seed.unwrap_or(0);
        let mut ids = [0u32; MAX_STOP_IDS];
        ids[..stop_ids.len()].copy_from_slice(stop_ids);
        Ok(SamplerParams {
            inv_temperature: if t == 0.0 { 0.0 } else { 1.0 / t },
            top_k: if top_k == 0 { MAX_CANDIDATES } else { top_k },
            top_p,
            min_p,
            repeat,
            inv_repeat: 1.0 / repeat,
            frequency,
            presence,
            penalty_last_n: last_n,
            penalties_on: u32::from(penalties_on),
            seed_lo: seed as u32,
            seed_hi: (seed >> 32) as u32,
            n_stop: stop_ids.len() as u32,
            constrained: 0,
            _pad: [0; 2],
            stop_ids: ids,
        })
    }
}

impl SamplerParams {
    /// Whether the next token is the argmax.
    pub fn greedy(&self) -> bool {
        self.inv_temperature == 0.0
    }
}
