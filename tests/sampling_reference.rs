//! The CPU reference sampler (the GPU sampler's exact arithmetic) against distributions derived
//! here independently, in f64, from the documented rules. Each case draws 40,000 tokens (the
//! counter-based RNG over positions) and requires every candidate's frequency within 5 binomial
//! standard deviations (+0.002) of its expected probability — tight enough that a wrong
//! temperature (1.1 instead of 1) or a dropped filter fails, as the last test shows.
#![cfg(not(target_arch = "wasm32"))]

use fuselm::sampling::reference::{sample, window_counts};
use fuselm::sampling::SamplingOptions;
use std::collections::HashMap;

const DRAWS: u32 = 40_000;

/// 300 logits (more than the 128-candidate cap): a smooth spread with a few clear leaders.
fn logits() -> Vec<f32> {
    (0..300)
        .map(|i| {
            let x = i as f32;
            4.0 - 0.05 * x + if i % 7 == 0 { 1.0 } else { 0.0 }
        })
        .collect()
}

/// Expected distribution from the documented rules, in f64: temperature, the 128 best,
/// top-k, top-p, min-p.
fn expected(l: &[f32], t: f64, top_k: usize, top_p: f64, min_p: f64) -> HashMap<u32, f64> {
    let mut z: Vec<(f64, u32)> = l
        .iter()
        .enumerate()
        .map(|(i, &v)| (f64::from(v) / t, i as u32))
        .collect();
    z.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    z.truncate(128.min(top_k));
    let q: Vec<f64> = z.iter().map(|(v, _)| (v - z[0].0).exp()).collect();
    let mut n = q.len();
    let total: f64 = q.iter().sum();
    let mut cum = 0.0;
    for (i, v) in q.iter().enumerate() {
        cum += v;
        if cum >= top_p * total {
            n = n.min(i + 1);
            break;
        }
    }
    if let Some(i) = (1..n).find(|&i| q[i] < min_p) {
        n = i;
    }
    let s: f64 = q[..n].iter().sum();
    z[..n]
        .iter()
        .zip(&q)
        .map(|(&(_, id), &v)| (id, v / s))
        .collect()
}

fn frequencies(l: &[f32], o: &SamplingOptions) -> HashMap<u32, f64> {
    let p = o.resolve(&[]).unwrap();
    let mut counts = HashMap::new();
    for pos in 0..DRAWS {
        *counts
            .entry(sample(l, &HashMap::new(), &p, pos))
            .or_insert(0u32) += 1;
    }
    counts
        .into_iter()
        .map(|(id, c)| (id, f64::from(c) / f64::from(DRAWS)))
        .collect()
}

fn matches(got: &HashMap<u32, f64>, want: &HashMap<u32, f64>) -> Result<(), String> {
    for id in got.keys() {
        if !want.contains_key(id) {
            return Err(format!("id {id} drawn but excluded by the filters"));
        }
    }
    for (&id, &p) in want {
        let f = got.get(&id).copied().unwrap_or(0.0);
        let sd = (p * (1.0 - p) / f64::from(DRAWS)).sqrt();
        if (f - p).abs() > 5.0 * sd + 0.002 {
            return Err(format!("id {id}: frequency {f:.4}, expected {p:.4}"));
        }
    }
    Ok(())
}

fn opts(t: f32, k: u32, p: f32, m: f32) -> SamplingOptions {
    SamplingOptions {
        temperature: Some(t),
        top_k: Some(k),
        top_p: Some(p),
        min_p: Some(m),
        seed: Some(99),
        ..Default::default()
    }
}

#[test]
fn temperature_and_filters_give_the_documented_distribution() {
    let l = logits();
    for (t, k, p, m) in [
        (1.0, 0, 1.0, 0.0),
        (0.5, 0, 1.0, 0.0),
        (2.0, 0, 1.0, 0.0),
        (1.0, 10, 1.0, 0.0),
        (1.0, 0, 0.8, 0.0),
        (1.0, 0, 1.0, 0.3),
        (0.7, 40, 0.9, 0.05),
    ] {
        let got = frequencies(&l, &opts(t, k, p, m));
        let want = expected(
            &l,
            f64::from(t),
            if k == 0 { 128 } else { k as usize },
            f64::from(p),
            f64::from(m),
        );
        matches(&got, &want).unwrap_or_else(|e| panic!("T={t} k={k} p={p} min_p={m}: {e}"));
    }
}

#[test]
fn the_statistic_detects_a_wrong_temperature_and_a_missing_filter() {
    let l = logits();
    let got = frequencies(&l, &opts(1.0, 0, 1.0, 0.0));
    assert!(matches(&got, &expected(&l, 1.1, 128, 1.0, 0.0)).is_err());
    let got = frequencies(&l, &opts(1.0, 0, 0.8, 0.0));
    assert!(matches(&got, &expected(&l, 1.0, 128, 1.0, 0.0)).is_err());
}

#[test]
fn penalties_greedy_ties_nan_and_seeds() {
    // Greedy: ties to the lowest id; NaN never chosen.
    let p = SamplingOptions::default().resolve(&[]).unwrap();
    assert_eq!(
        sample(&[1.0, 3.0, 3.0, f32::NAN], &HashMap::new(), &p, 0),
        1
    );
    assert_eq!(sample(&[f32::NAN, 0.5], &HashMap::new(), &p, 0), 1);
    // A repetition penalty of 2 halves a positive logit: id 0 (4.0 → 2.0) loses to id 1 (3.0).
    let rep = SamplingOptions {
        repetition_penalty: Some(2.0),
        ..Default::default()
    }
    .resolve(&[])
    .unwrap();
    let seq = [0u32, 5, 5];
    let counts = window_counts(&seq, 3, 64);
    assert_eq!(sample(&[4.0, 3.0], &counts, &rep, 3), 1);
    // Frequency penalty per occurrence: id 5 seen twice, 2 × 1.5 = 3 below id 6.
    let freq = SamplingOptions {
        frequency_penalty: Some(1.5),
        ..Default::default()
    }
    .resolve(&[])
    .unwrap();
    let mut l = vec![0.0f32; 8];
    l[5] = 2.0;
    l[6] = 0.5;
    assert_eq!(sample(&l, &counts, &freq, 3), 6);
    // The window: only the last N tokens count.
    assert_eq!(window_counts(&seq, 3, 1).get(&0), None);
    // Seeds: deterministic, and different seeds give different sequences.
    let draw = |seed| {
        let p = SamplingOptions {
            temperature: Some(1.0),
            seed: Some(seed),
            ..Default::default()
        }
        .resolve(&[])
        .unwrap();
        (0..64)
            .map(|pos| sample(&logits(), &HashMap::new(), &p, pos))
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(7), draw(7));
    assert_ne!(draw(7), draw(8));
}

#[test]
fn bad_options_are_typed_errors() {
    for o in [
        SamplingOptions {
            temperature: Some(-1.0),
            ..Default::default()
        },
        SamplingOptions {
            temperature: Some(f32::NAN),
            ..Default::default()
        },
        SamplingOptions {
            top_k: Some(129),
            ..Default::default()
        },
        SamplingOptions {
            top_p: Some(0.0),
            ..Default::default()
        },
        SamplingOptions {
            min_p: Some(1.5),
            ..Default::default()
        },
        SamplingOptions {
            repetition_penalty: Some(0.0),
            ..Default::default()
        },
        SamplingOptions {
            frequency_penalty: Some(f32::INFINITY),
            ..Default::default()
        },
    ] {
        let e = o.resolve(&[]).unwrap_err();
        assert_eq!(e.kind(), fuselm::error::ErrorKind::InvalidArgument, "{o:?}");
    }
    assert!(SamplingOptions::default().resolve(&[0; 17]).is_err());
}
