//! Log-probabilities of generated tokens (`logprobs` / `top_logprobs`): what they are, the CPU
//! reference, and the GPU's per-position rows (`shaders/logprob_choose.wgsl`).
//!
//! A token's log-probability is taken over the logits the sampler ranks at that step: penalised
//! (repetition, frequency, presence), with the ids a constraint disallows removed, at
//! temperature 1 (the model's distribution as the sampler's filters see it, before temperature
//! and the top-k/top-p/min-p cuts). The top list holds the most likely allowed ids, best first
//! (ties: lower id first).

use super::reference::{order_key, value_of, MASKED_LOGIT};
use super::SamplerParams;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The most alternatives a step reports (`top_logprobs`, as OpenAI's API allows).
pub const TOP_LOGPROBS_MAX: u32 = 20;

// logprob_choose.wgsl packs whole lists of TOP_LOGPROBS_MAX into blocks of MAX_CANDIDATES.
const _: () = assert!(TOP_LOGPROBS_MAX <= super::MAX_CANDIDATES);

/// u32 words per position in the GPU's log-probability rows: the token's logprob (f32 bits),
/// the count n, then n (id, logprob bits) pairs.
pub const LOGPROB_STRIDE: u32 = 2 + 2 * TOP_LOGPROBS_MAX;

/// One generated token's log-probability and its step's most likely ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprobs {
    /// Natural log of the token's probability.
    pub logprob: f32,
    /// (id, logprob) of the step's most likely allowed ids, best first.
    pub top: Vec<(u32, f32)>,
}

impl TokenLogprobs {
    /// Decodes one GPU row (`LOGPROB_STRIDE` words).
    pub fn from_row(row: &[u32]) -> Self {
        let n = (row[1].min(TOP_LOGPROBS_MAX)) as usize;
        Self {
            logprob: f32::from_bits(row[0]),
            top: (0..n)
                .map(|i| (row[2 + 2 * i], f32::from_bits(row[3 + 2 * i])))
                .collect(),
        }
    }
}

/// The CPU reference: `id`'s log-probability and the `top_n` best allowed ids at a step with
/// these raw `logits`, penalty `counts`, settings and constraint `mask` (one bit per id),
/// computed in f64. NaN logits count for nothing.
pub fn reference(
    logits: &[f32],
    counts: &HashMap<u32, u32>,
    p: &SamplerParams,
    mask: Option<&[u32]>,
    id: u32,
    top_n: u32,
) -> TokenLogprobs {
    let values: Vec<f32> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| value_of(l, i as u32, counts, p, mask))
        .collect();
    let finite = values.iter().copied().filter(|v| !v.is_nan());
    let m = f64::from(finite.clone().fold(f32::MIN, f32::max));
    let l: f64 = finite.map(|v| (f64::from(v) - m).exp()).sum();
    let norm = m + l.ln();
    let lp = |v: f32| (f64::from(v) - norm) as f32;
    let n = top_n.min(TOP_LOGPROBS_MAX) as usize;
    // The GPU's order (`order_key`: z descending, then id; -0.0 and 0.0 tie), selecting the
    // best n before sorting only those.
    let mut order: Vec<u64> = if n == 0 {
        Vec::new()
    } else {
        values
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_nan() && **v != MASKED_LOGIT)
            .map(|(i, &v)| order_key(v, i as u32))
            .collect()
    };
    if order.len() > n {
        order.select_nth_unstable(n);
        order.truncate(n);
    }
    order.sort_unstable();
    TokenLogprobs {
        logprob: lp(values[id as usize]),
        top: order
            .iter()
            .map(|&k| {
                let i = k as u32;
                (i, lp(values[i as usize]))
            })
            .collect(),
    }
}
