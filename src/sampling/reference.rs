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

/// Occurrences of each id in `sequence[position - last_n .. position]`.
pub fn window_counts(sequence: &[u32], position: usize, last_n: u32) -> HashMap<u32, u32> {
    let end = position.min(sequence.len());
    let start = position.saturating_sub(last_n as usize).min(end);
    let mut counts = HashMap::new();
    for &id in &sequence[start..end] {
        *counts.entry(id).or_insert(0) += 1;
    }
    counts
}

/// Candidates after penalties, temperature and every filter: `(id, q)` best first, where
/// `q = exp(z - z_max)` is the unnormalised probability. Empty when greedy.
pub fn candidates(
    logits: &[f32],
    counts: &HashMap<u32, u32>,
    p: &SamplerParams,
) -> Vec<(u32, f32)> {
    let mut z: Vec<(f32, u32)> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| {
            let id = i as u32;
            let c = counts.get(&id).copied().unwrap_or(0);
            (penalize(l, c, p) * p.inv_temperature, id)
        })
        .filter(|(v, _)| !v.is_nan())
        .collect();
    z.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    z.truncate(MAX_CANDIDATES as usize);
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

/// The id the sampler chooses for sequence `position` given the raw `logits`.
pub fn sample(logits: &[f32], counts: &HashMap<u32, u32>, p: &SamplerParams, position: u32) -> u32 {
    if p.greedy() {
        let mut best: Option<(f32, u32)> = None;
        for (i, &l) in logits.iter().enumerate() {
            let id = i as u32;
            let v = penalize(l, counts.get(&id).copied().unwrap_or(0), p);
            if v.is_nan() {
                continue;
            }
            if best.is_none_or(|(bv, _)| v > bv) {
                best = Some((v, id));
            }
        }
        return best.map_or(0, |(_, id)| id);
    }
    let cands = candidates(logits, counts, p);
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

/// The exact distribution [`sample`] draws from, normalised (for tests).
pub fn probabilities(
    logits: &[f32],
    counts: &HashMap<u32, u32>,
    p: &SamplerParams,
) -> Vec<(u32, f64)> {
    let cands = candidates(logits, counts, p);
    let total: f64 = cands.iter().map(|&(_, q)| f64::from(q)).sum();
    cands
        .into_iter()
        .map(|(id, q)| (id, f64::from(q) / total))
        .collect()
}
