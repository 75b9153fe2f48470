//! The CPU reference sampler: the exact steps the GPU sampler takes, in f32, in the same order
//! (module docs of [`super`]). The `unfused` strategy samples with it on the host.

use super::rng::uniform;
use super::{SamplerParams, MAX_CANDIDATES};
use std::collections::HashMap;

/// The penalised logit of an id seen `count` times in the window (llama.cpp's formula, with a
/// multiplication by the reciprocal where llama.cpp divides).
pub fn penalize(logit: f32, count: u32, p: &SamplerParams) -> f32 {
    if p.penalties_on == 0 || count == 0 {
        return logit;
    }
    let r = if logit > 0.0 {
        logit * p.inv_repeat
    } else {
        logit * p.repeat
    };
    r - (count as f32 * p.frequency + p.presence)
}

/// The logit an id gets where a constraint disallows it (`MASKED_LOGIT` in
/// shaders/sampler_params.wgsl): f32's lowest, so it is never the best and its q is 0.
pub const MASKED_LOGIT: f32 = f32::MIN;

/// Whether `mask` (one bit per id; None: no constraint) disallows `id`.
fn masked(mask: Option<&[u32]>, id: u32) -> bool {
    mask.is_some_and(|m| {
        m.get(id as usize / 32)
            .is_none_or(|w| w >> (id % 32) & 1 == 0)
    })
}

/// The value the sampler ranks: the penalised logit, or [`MASKED_LOGIT`] for a disallowed id.
pub(crate) fn value_of(
    logit: f32,
    id: u32,
    counts: &HashMap<u32, u32>,
    p: &SamplerParams,
    mask: Option<&[u32]>,
) -> f32 {
    if masked(mask, id) {
        return MASKED_LOGIT;
    }
    penalize(logit, counts.get(&id).copied().unwrap_or(0), p)
}

/// Occurrences of each id in `sequence[position - last_n .. position]` (saturating at 0; the
/// end is clamped to the sequence's length).
pub fn window_counts(sequence: &[u32], position: usize, last_n: u32) -> HashMap<u32, u32> {
    let end = position.min(sequence.len());
    let start = position.saturating_sub(last_n as usize).min(end);
    let mut counts = HashMap::new();
    for &id in &sequence[start..end] {
        *counts.entry(id).or_insert(0) += 1;
    }
    counts
}

/// The candidate order as an integer sort key: ascending keys are z descending, then id
/// ascending (`better` in shaders/sampler_params.wgsl). The comparison is IEEE's: -0.0 and
/// 0.0 tie (and go by id). z is never NaN here.
pub(crate) fn order_key(z: f32, id: u32) -> u64 {
    // -0.0 + 0.0 = +0.0; then the bits, flipped for negatives, increase with z.
    let bits = (z + 0.0).to_bits();
    let ascending = if bits >> 31 == 1 {
        !bits
    } else {
        bits | 0x8000_0000
    };
    (u64::from(!ascending) << 32) | u64::from(id)
}

/// The greedy choice: the largest penalised logit, ties to the lowest id, NaN never chosen;
/// `None` when every logit is NaN (the sampler then returns 0).
fn argmax(
    logits: &[f32],
    counts: &HashMap<u32, u32>,
    p: &SamplerParams,
    mask: Option<&[u32]>,
) -> Option<u32> {
    let mut best: Option<(f32, u32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        let id = i as u32;
        let v = value_of(l, id, counts, p, mask);
        if v.is_nan() {
            continue;
        }
        if best.is_none_or(|(bv, _)| v > bv) {
            best = Some((v, id));
        }
    }
    best.map(|(_, id)| id)
}

/// The tokens [`sample`] draws from, after penalties, temperature and every filter: `(id, q)`
/// best first, where `q = exp(z - z_0)` (f32) is the unnormalised probability. Greedy: the
/// argmax alone with `q = 1`. Empty when every logit is NaN.
pub fn candidates(
    logits: &[f32],
    counts: &HashMap<u32, u32>,
    p: &SamplerParams,
) -> Vec<(u32, f32)> {
    candidates_masked(logits, counts, p, None)
}

/// [`candidates`] where `mask` (one bit per id) allows only some ids: the others rank with
/// [`MASKED_LOGIT`] (q = 0: never drawn).
pub fn candidates_masked(
    logits: &[f32],
    counts: &HashMap<u32, u32>,
    p: &SamplerParams,
    mask: Option<&[u32]>,
) -> Vec<(u32, f32)> {
    if p.greedy() {
        return argmax(logits, counts, p, mask)
            .map(|id| vec![(id, 1.0)])
            .unwrap_or_default();
    }
    let mut z: Vec<(f32, u32)> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| {
            let id = i as u32;
            (value_of(l, id, counts, p, mask) * p.inv_temperature, id)
        })
        .filter(|(v, _)| !v.is_nan())
        .collect();
    // The order is total (ids are distinct), so selecting the best 128 and sorting only those
    // gives exactly the head of a full sort.
    let cap = MAX_CANDIDATES as usize;
    if z.len() > cap {
        z.select_nth_unstable_by_key(cap - 1, |&(v, id)| order_key(v, id));
        z.truncate(cap);
    }
    z.sort_unstable_by_key(|&(v, id)| order_key(v, id));
    let mut n = z.len().min(p.top_k as usize);
    if n == 0 {
        return Vec::new();
    }
    let z0 = z[0].0;
    let q: Vec<f32> = z[..n].iter().map(|&(v, _)| (v - z0).exp()).collect();
    if p.top_p < 1.0 {
        let mut total = 0f32;
        for &v in &q[..n] {
            total += v;
        }
        let mut cum = 0f32;
        for (i, &v) in q[..n].iter().enumerate() {
            cum += v;
            if cum >= p.top_p * total {
                n = i + 1;
                break;
            }
        }
    }
    if p.min_p > 0.0 {
        // q_0 = 1 >= min_p: at least one candidate stays.
        if let Some(i) = (1..n).find(|&i| q[i] < p.min_p) {
            n = i;
        }
    }
    z[..n]
        .iter()
        .zip(&q)
        .map(|(&(_, id), &v)| (id, v))
        .collect()
}

/// The id the sampler chooses for the token at sequence `position` (the RNG counter) given the
/// raw `logits` and the penalty window's `counts` ([`window_counts`]).
pub fn sample(logits: &[f32], counts: &HashMap<u32, u32>, p: &SamplerParams, position: u32) -> u32 {
    sample_masked(logits, counts, p, position, None)
}

/// [`sample`] where `mask` (one bit per id) allows only some ids.
pub fn sample_masked(
    logits: &[f32],
    counts: &HashMap<u32, u32>,
    p: &SamplerParams,
    position: u32,
    mask: Option<&[u32]>,
) -> u32 {
    if p.greedy() {
        return argmax(logits, counts, p, mask).unwrap_or(0);
    }
    let cands = candidates_masked(logits, counts, p, mask);
    let Some(&(last, _)) = cands.last() else {
        return 0;
    };
    let mut total = 0f32;
    for &(_, q) in &cands {
        total += q;
    }
    let target = uniform(p.seed_lo, p.seed_hi, position) * total;
    let mut cum = 0f32;
    for &(id, q) in &cands {
        cum += q;
        if target < cum {
            return id;
        }
    }
    last
}

/// The exact distribution [`sample`] draws from, normalised in f64, best first (for tests).
/// Greedy: the argmax with probability 1; every logit NaN: id 0 with probability 1.
pub fn probabilities(
    logits: &[f32],
    counts: &HashMap<u32, u32>,
    p: &SamplerParams,
) -> Vec<(u32, f64)> {
    let cands = candidates(logits, counts, p);
    if cands.is_empty() {
        return vec![(0, 1.0)];
    }
    let total: f64 = cands.iter().map(|&(_, q)| f64::from(q)).sum();
    cands
        .into_iter()
        .map(|(id, q)| (id, f64::from(q) / total))
        .collect()
}
