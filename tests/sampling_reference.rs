//! The CPU reference sampler (the GPU sampler's exact arithmetic, `fuselm::sampling::reference`)
//! against distributions re-derived here, in f64, from the documented rules (no code shared with
//! the sampler: division by the temperature and by the repetition penalty, f64 sums).
//!
//! Each distribution case draws 40,000 tokens, the counter-based RNG running over positions
//! 0..40,000, and passes only if (1) no drawn id is excluded by the rules, (2) every id's count
//! is within 5 binomial standard deviations (+1 count for discreteness) of its expectation and
//! (3) Pearson's chi-square over the ids (those expecting < 5 draws pooled) is below its
//! 5-sigma quantile (Wilson–Hilferty). `the_statistic_rejects_wrong_rules` shows that this
//! fails for a temperature 5% off, a dropped or off-by-one filter, a missing candidate cap and
//! an ignored penalty. Native only (plain CPU code, nothing target-specific).
#![cfg(not(target_arch = "wasm32"))]

use fuselm::error::ErrorKind;
use fuselm::sampling::reference::{probabilities, sample, window_counts};
use fuselm::sampling::rng::{pcg, uniform};
use fuselm::sampling::{SamplerParams, SamplingOptions, MAX_CANDIDATES, MAX_STOP_IDS};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

const DRAWS: u32 = 40_000;
const VOCAB: usize = 300;

/// 300 logits (more than the 128-candidate cap): a smooth slope from 4 down to -11 with a +1
/// bonus on every 7th id, so there are clear leaders, near-ties and negative logits.
fn logits() -> Vec<f32> {
    (0..VOCAB)
        .map(|i| 4.0 - 0.05 * i as f32 + if i % 7 == 0 { 1.0 } else { 0.0 })
        .collect()
}

/// The documented rules, with the defaults of `SamplingOptions`.
#[derive(Debug, Clone, Copy)]
struct Rules {
    t: f64,
    top_k: usize,
    top_p: f64,
    min_p: f64,
    repeat: f64,
    frequency: f64,
    presence: f64,
    /// The candidate cap (128 by the docs; other values only to show that the test notices).
    cap: usize,
}

impl Rules {
    fn t(t: f64) -> Self {
        Rules {
            t,
            top_k: 128,
            top_p: 1.0,
            min_p: 0.0,
            repeat: 1.0,
            frequency: 0.0,
            presence: 0.0,
            cap: 128,
        }
    }
}

/// Counts of each id in the `last_n` tokens before `position` (written out again here).
fn window(sequence: &[u32], position: usize, last_n: usize) -> HashMap<u32, u32> {
    let mut counts = HashMap::new();
    for (i, &id) in sequence.iter().enumerate() {
        if i < position && i + last_n >= position {
            *counts.entry(id).or_insert(0) += 1;
        }
    }
    counts
}

/// The distribution the rules define, in f64: penalties (llama.cpp: a positive logit divided
/// by the repetition penalty, a negative one multiplied; minus count × frequency + presence),
/// z = logit / T, NaN dropped, the `cap` best (ties to the lower id), top-k, top-p (the
/// smallest prefix reaching p of the mass), min-p (relative to the best), normalised.
fn expected(l: &[f32], counts: &HashMap<u32, u32>, r: &Rules) -> Vec<(u32, f64)> {
    let mut z: Vec<(f64, u32)> = Vec::new();
    for (i, &v) in l.iter().enumerate() {
        if v.is_nan() {
            continue;
        }
        let id = i as u32;
        let mut v = f64::from(v);
        let c = f64::from(counts.get(&id).copied().unwrap_or(0));
        if c > 0.0 {
            v = if v > 0.0 { v / r.repeat } else { v * r.repeat };
            v -= c * r.frequency + r.presence;
        }
        z.push((v / r.t, id));
    }
    z.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
    z.truncate(r.cap.min(r.top_k));
    let q: Vec<f64> = z.iter().map(|(v, _)| (v - z[0].0).exp()).collect();
    let mut n = q.len();
    if r.top_p < 1.0 {
        let total: f64 = q.iter().sum();
        let mut cum = 0.0;
        for (i, v) in q.iter().enumerate() {
            cum += v;
            if cum >= r.top_p * total {
                n = i + 1;
                break;
            }
        }
    }
    n = q[..n].iter().take_while(|&&v| v >= r.min_p).count().max(1);
    let s: f64 = q[..n].iter().sum();
    z[..n]
        .iter()
        .zip(&q)
        .map(|(&(_, id), &v)| (id, v / s))
        .collect()
}

/// How often each id is drawn over positions 0..DRAWS. Memoised: several tests look at the
/// same draws (the cache holds one cell per case, so concurrent tests draw each case once).
fn draw(l: &[f32], counts: &HashMap<u32, u32>, o: &SamplingOptions) -> HashMap<u32, u32> {
    type Cell = Arc<OnceLock<HashMap<u32, u32>>>;
    static CACHE: OnceLock<Mutex<HashMap<String, Cell>>> = OnceLock::new();
    let mut sorted: Vec<_> = counts.iter().collect();
    sorted.sort();
    let key = format!("{l:?} {sorted:?} {o:?}");
    let cell = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(key)
        .or_default()
        .clone();
    cell.get_or_init(|| {
        let p = o.resolve(&[]).unwrap();
        let mut drawn = HashMap::new();
        for pos in 0..DRAWS {
            *drawn.entry(sample(l, counts, &p, pos)).or_insert(0u32) += 1;
        }
        drawn
    })
    .clone()
}

/// The 5-sigma upper quantile of chi-square with `df` degrees of freedom (Wilson–Hilferty).
fn chi2_limit(df: f64) -> f64 {
    let a = 2.0 / (9.0 * df);
    df * (1.0 - a + 5.0 * a.sqrt()).powi(3)
}

/// Whether `drawn` (counts over DRAWS draws) is a sample of `want`; the error lists every
/// reason why not.
fn check(drawn: &HashMap<u32, u32>, want: &[(u32, f64)]) -> Result<(), String> {
    let n = f64::from(DRAWS);
    let want_map: HashMap<u32, f64> = want.iter().copied().collect();
    let mut errors = Vec::new();
    for (id, &c) in drawn {
        if !want_map.contains_key(id) {
            errors.push(format!("id {id} drawn {c} times but excluded by the rules"));
        }
    }
    let (mut stat, mut bins, mut rest_e, mut rest_c) = (0.0, 0u32, 0.0, 0.0);
    for &(id, p) in want {
        let c = f64::from(drawn.get(&id).copied().unwrap_or(0));
        let e = n * p;
        let sd = (n * p * (1.0 - p)).sqrt();
        if (c - e).abs() > 5.0 * sd + 1.0 {
            errors.push(format!(
                "id {id}: drawn {c} times, expected {e:.1} ± {sd:.1}"
            ));
        }
        if e >= 5.0 {
            stat += (c - e).powi(2) / e;
            bins += 1;
        } else {
            rest_e += e;
            rest_c += c;
        }
    }
    if rest_e >= 1.0 {
        stat += (rest_c - rest_e).powi(2) / rest_e;
        bins += 1;
    }
    if bins >= 2 {
        let df = f64::from(bins - 1);
        if stat > chi2_limit(df) {
            errors.push(format!(
                "chi-square {stat:.1} over {df} degrees of freedom (5-sigma limit {:.1})",
                chi2_limit(df)
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
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

fn rules_of(o: &SamplingOptions) -> Rules {
    let k = o.top_k.unwrap_or(0) as usize;
    Rules {
        t: f64::from(o.temperature.unwrap()),
        top_k: if k == 0 { 128 } else { k },
        top_p: f64::from(o.top_p.unwrap_or(1.0)),
        min_p: f64::from(o.min_p.unwrap_or(0.0)),
        repeat: f64::from(o.repetition_penalty.unwrap_or(1.0)),
        frequency: f64::from(o.frequency_penalty.unwrap_or(0.0)),
        presence: f64::from(o.presence_penalty.unwrap_or(0.0)),
        cap: 128,
    }
}

fn filter_cases() -> Vec<SamplingOptions> {
    vec![
        opts(1.0, 0, 1.0, 0.0),
        opts(0.5, 0, 1.0, 0.0),
        opts(2.0, 0, 1.0, 0.0),
        opts(1.0, 10, 1.0, 0.0),
        opts(1.0, 0, 0.8, 0.0),
        opts(1.0, 0, 1.0, 0.3),
        opts(0.7, 40, 0.9, 0.05),
        opts(1.5, 0, 0.95, 0.02),
    ]
}

/// A sequence whose window holds leaders (0 twice, 7, 14) and a negative logit (id 90).
const SEQUENCE: [u32; 8] = [3, 0, 14, 90, 0, 7, 5, 5];

fn penalty_cases() -> Vec<SamplingOptions> {
    let base = |f: fn(&mut SamplingOptions)| {
        let mut o = opts(1.0, 0, 1.0, 0.0);
        f(&mut o);
        o
    };
    vec![
        base(|o| o.repetition_penalty = Some(1.5)),
        base(|o| o.frequency_penalty = Some(0.8)),
        base(|o| o.presence_penalty = Some(1.2)),
        base(|o| {
            o.temperature = Some(0.8);
            o.top_p = Some(0.9);
            o.repetition_penalty = Some(1.3);
            o.frequency_penalty = Some(0.3);
            o.presence_penalty = Some(0.4);
        }),
        // Only the last 3 tokens (7, 5, 5) are penalised.
        base(|o| {
            o.presence_penalty = Some(2.0);
            o.penalty_last_n = Some(3);
        }),
        // A negative presence penalty raises the logits of present ids.
        base(|o| o.presence_penalty = Some(-0.5)),
    ]
}

#[test]
fn temperature_and_filters_give_the_documented_distribution() {
    let l = logits();
    let none = HashMap::new();
    // At T = 2 the tokens beyond the 128 best hold noticeable mass, so the cap matters.
    let capped: Vec<u32> = expected(&l, &none, &Rules::t(2.0))
        .iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(capped.len(), 128);
    let uncapped = Rules {
        cap: VOCAB,
        top_k: VOCAB,
        ..Rules::t(2.0)
    };
    let tail: f64 = expected(&l, &none, &uncapped)
        .iter()
        .filter(|e| !capped.contains(&e.0))
        .map(|e| e.1)
        .sum();
    assert!(tail > 0.01, "tail mass {tail}");
    for o in filter_cases() {
        let got = draw(&l, &none, &o);
        let want = expected(&l, &none, &rules_of(&o));
        check(&got, &want).unwrap_or_else(|e| panic!("{o:?}: {e}"));
    }
}

#[test]
fn penalties_give_the_documented_distribution() {
    let l = logits();
    let counts = window(&SEQUENCE, SEQUENCE.len(), 64);
    let plain = expected(&l, &HashMap::new(), &Rules::t(1.0));
    let p_of = |d: &[(u32, f64)], id: u32| d.iter().find(|e| e.0 == id).map_or(0.0, |e| e.1);
    for o in penalty_cases() {
        let last_n = o.penalty_last_n.unwrap_or(64) as usize;
        let counts = window(&SEQUENCE, SEQUENCE.len(), last_n);
        let got = draw(&l, &counts, &o);
        let want = expected(&l, &counts, &rules_of(&o));
        check(&got, &want).unwrap_or_else(|e| panic!("{o:?}: {e}"));
    }
    // The leader, id 0 (seen twice), is drawn much less often under each penalty, as predicted.
    for o in &penalty_cases()[..3] {
        let got = draw(&l, &counts, o);
        let f = f64::from(got.get(&0).copied().unwrap_or(0)) / f64::from(DRAWS);
        let want = p_of(&expected(&l, &counts, &rules_of(o)), 0);
        assert!(f < 0.6 * p_of(&plain, 0), "{o:?}: id 0 frequency {f}");
        assert!(
            (f - want).abs() < 0.01,
            "{o:?}: id 0 frequency {f}, expected {want}"
        );
    }
    // penalty_last_n = 0 disables them: the plain distribution.
    let mut off = penalty_cases()[3].clone();
    off.penalty_last_n = Some(0);
    let got = draw(&l, &window(&SEQUENCE, SEQUENCE.len(), 0), &off);
    let want = expected(&l, &HashMap::new(), &rules_of(&off));
    check(&got, &want).unwrap();
}

#[test]
fn repetition_penalty_divides_positive_and_multiplies_negative_logits() {
    // A small vocabulary: id 0 (2.0 → 1.0) and id 1 (-1.0 → -2.0) are in the window, id 2
    // (-1.0) and id 3 (0.5) are not.
    let l = [2.0, -1.0, -1.0, 0.5];
    let counts = HashMap::from([(0, 1), (1, 1)]);
    let o = SamplingOptions {
        temperature: Some(1.0),
        repetition_penalty: Some(2.0),
        seed: Some(3),
        ..Default::default()
    };
    let got = draw(&l, &counts, &o);
    check(&got, &expected(&l, &counts, &rules_of(&o))).unwrap();
    // Exactly: softmax of [1, -2, -1, 0.5].
    let e: Vec<f64> = [1.0f64, -2.0, -1.0, 0.5].iter().map(|v| v.exp()).collect();
    let s: f64 = e.iter().sum();
    let probs = probabilities(&l, &counts, &o.resolve(&[]).unwrap());
    assert_eq!(probs.len(), 4);
    for (id, p) in probs {
        assert!((p - e[id as usize] / s).abs() < 1e-6, "id {id}: {p}");
    }
    // The wrong sign rule (dividing the negative logit too) is rejected.
    let wrong = [1.0f64, -0.5, -1.0, 0.5].map(f64::exp);
    let ws: f64 = wrong.iter().sum();
    let wrong: Vec<(u32, f64)> = (0..4).map(|i| (i as u32, wrong[i] / ws)).collect();
    assert!(check(&got, &wrong).is_err());
}

#[test]
fn probabilities_are_the_documented_distribution() {
    let l = logits();
    let mut cases: Vec<(SamplingOptions, HashMap<u32, u32>)> = filter_cases()
        .into_iter()
        .map(|o| (o, HashMap::new()))
        .collect();
    for o in penalty_cases() {
        let last_n = o.penalty_last_n.unwrap_or(64) as usize;
        cases.push((o, window(&SEQUENCE, SEQUENCE.len(), last_n)));
    }
    for (o, counts) in cases {
        // Compared by id: candidates with (nearly) equal z may rank either way.
        let mut got = probabilities(&l, &counts, &o.resolve(&[]).unwrap());
        let mut want = expected(&l, &counts, &rules_of(&o));
        got.sort_by_key(|e| e.0);
        want.sort_by_key(|e| e.0);
        assert_eq!(got.len(), want.len(), "{o:?}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.0, w.0, "{o:?}");
            assert!(
                (g.1 - w.1).abs() < 1e-5,
                "{o:?}: id {}: {} vs {}",
                g.0,
                g.1,
                w.1
            );
        }
    }
}

#[test]
fn the_statistic_rejects_wrong_rules() {
    let l = logits();
    let none = HashMap::new();
    let at = |o: &SamplingOptions| (draw(&l, &none, o), rules_of(o));
    let rejects = |got: &HashMap<u32, u32>, counts: &HashMap<u32, u32>, r: Rules| {
        let e = check(got, &expected(&l, counts, &r));
        assert!(e.is_err(), "not rejected: {r:?}");
    };
    let (got, r) = at(&opts(1.0, 0, 1.0, 0.0));
    check(&got, &expected(&l, &none, &r)).unwrap();
    // A temperature 10% or 5% off: the chi-square alone rejects it. (3% off is not detected
    // with 40,000 draws.)
    for t in [1.1, 0.95] {
        let e = check(&got, &expected(&l, &none, &Rules { t, ..r })).unwrap_err();
        assert!(e.contains("chi-square"), "T = {t}: {e}");
    }
    rejects(&got, &none, Rules { top_p: 0.97, ..r });
    let (got, r) = at(&opts(2.0, 0, 1.0, 0.0));
    rejects(
        &got,
        &none,
        Rules {
            cap: VOCAB,
            top_k: VOCAB,
            ..r
        },
    );
    rejects(&got, &none, Rules { cap: 120, ..r });
    let (got, r) = at(&opts(1.0, 10, 1.0, 0.0));
    rejects(&got, &none, Rules { top_k: 11, ..r });
    rejects(&got, &none, Rules { top_k: 9, ..r });
    let (got, r) = at(&opts(1.0, 0, 0.8, 0.0));
    rejects(&got, &none, Rules { top_p: 1.0, ..r });
    let (got, r) = at(&opts(1.0, 0, 1.0, 0.3));
    rejects(&got, &none, Rules { min_p: 0.0, ..r });
    rejects(&got, &none, Rules { min_p: 0.4, ..r });
    let counts = window(&SEQUENCE, SEQUENCE.len(), 64);
    for o in &penalty_cases()[..3] {
        let got = draw(&l, &counts, o);
        rejects(&got, &HashMap::new(), rules_of(o));
    }
}

#[test]
fn nan_logits_are_never_drawn() {
    let mut l = logits();
    for id in [0, 7, 8, 200] {
        l[id] = f32::NAN;
    }
    let none = HashMap::new();
    for o in [opts(1.0, 0, 1.0, 0.0), opts(0.7, 20, 0.9, 0.05)] {
        let got = draw(&l, &none, &o);
        assert!([0, 7, 8, 200].iter().all(|id| !got.contains_key(id)));
        check(&got, &expected(&l, &none, &rules_of(&o))).unwrap_or_else(|e| panic!("{e}"));
    }
    // Every logit NaN: id 0, greedy or not.
    let all_nan = [f32::NAN; 5];
    for o in [SamplingOptions::default(), opts(1.0, 0, 0.5, 0.1)] {
        let p = o.resolve(&[]).unwrap();
        assert_eq!(sample(&all_nan, &none, &p, 1), 0);
        assert_eq!(probabilities(&all_nan, &none, &p), vec![(0, 1.0)]);
    }
}

#[test]
fn greedy_takes_the_largest_penalised_logit_ties_to_the_lowest_id() {
    let none = HashMap::new();
    let p = SamplingOptions::default().resolve(&[]).unwrap();
    assert!(p.greedy());
    assert_eq!(sample(&[1.0, 3.0, 3.0, f32::NAN], &none, &p, 0), 1);
    assert_eq!(sample(&[f32::NAN, 0.5, f32::NAN], &none, &p, 0), 1);
    assert_eq!(sample(&[-0.0, 0.0], &none, &p, 0), 0);
    assert_eq!(sample(&[0.0, -0.0], &none, &p, 0), 0);
    assert_eq!(sample(&[-5.0, -2.0, -2.0], &none, &p, 0), 1);
    assert_eq!(probabilities(&[1.0, 3.0, 3.0], &none, &p), vec![(1, 1.0)]);
    // Independent of the position (no draw).
    let l = logits();
    assert!((0..100).all(|pos| sample(&l, &none, &p, pos) == 0));
    // Penalties apply before the argmax: a repetition penalty of 2 halves id 0 (4 → 2) below
    // id 1 (3); a frequency penalty of 1.5 per occurrence puts id 5 (seen twice: 2 → -1) below
    // id 6 (0.5).
    let seq = [0u32, 5, 5];
    let counts = window_counts(&seq, 3, 64);
    let rep = SamplingOptions {
        repetition_penalty: Some(2.0),
        ..Default::default()
    };
    assert_eq!(
        sample(&[4.0, 3.0], &counts, &rep.resolve(&[]).unwrap(), 3),
        1
    );
    let freq = SamplingOptions {
        frequency_penalty: Some(1.5),
        ..Default::default()
    };
    let mut l = vec![0.0f32; 8];
    l[5] = 2.0;
    l[6] = 0.5;
    let p = freq.resolve(&[]).unwrap();
    assert_eq!(sample(&l, &counts, &p, 3), 6);
    // With penalty_last_n = 1 only the last 5 is counted: 2 - 1.5 = 0.5 ties id 6; 5 wins.
    let p = SamplingOptions {
        penalty_last_n: Some(1),
        ..freq
    }
    .resolve(&[])
    .unwrap();
    assert_eq!(sample(&l, &window_counts(&seq, 3, 1), &p, 3), 5);
}

#[test]
fn candidate_ties_go_to_the_lowest_id() {
    let none = HashMap::new();
    let top1 = opts(1.0, 1, 1.0, 0.0).resolve(&[]).unwrap();
    // Equal z: the lower id ranks first; -0.0 and 0.0 are equal (IEEE, like the GPU's `better`).
    for pos in 0..50 {
        assert_eq!(sample(&[1.0, 3.0, 3.0, 2.0], &none, &top1, pos), 1);
        assert_eq!(sample(&[-0.0, 0.0], &none, &top1, pos), 0);
        assert_eq!(sample(&[-1.0, 0.0, -0.0], &none, &top1, pos), 1);
    }
    // Equal z split the cap at 128 by id: 300 equal logits keep ids 0..128, uniformly.
    let flat = vec![1.0f32; VOCAB];
    let o = opts(1.0, 0, 1.0, 0.0);
    let got = draw(&flat, &none, &o);
    assert!(got.keys().all(|&id| id < MAX_CANDIDATES));
    let uniform128: Vec<(u32, f64)> = (0..MAX_CANDIDATES).map(|i| (i, 1.0 / 128.0)).collect();
    check(&got, &uniform128).unwrap();
}

#[test]
fn window_counts_cover_the_last_n_tokens_before_the_position() {
    let seq = [1u32, 2, 2, 3, 1, 1, 4];
    for position in 0..=seq.len() {
        for last_n in [0u32, 1, 2, 3, 5, 64] {
            assert_eq!(
                window_counts(&seq, position, last_n),
                window(&seq, position, last_n as usize),
                "position {position}, last_n {last_n}"
            );
        }
    }
    assert_eq!(window_counts(&seq, 7, 3), HashMap::from([(1, 2), (4, 1)]));
}

#[test]
fn seeds_are_deterministic_and_distinct() {
    let l = logits();
    let none = HashMap::new();
    let run = |seed: Option<u64>| {
        let p = SamplingOptions {
            temperature: Some(1.0),
            seed,
            ..Default::default()
        }
        .resolve(&[])
        .unwrap();
        (0..64)
            .map(|pos| sample(&l, &none, &p, pos))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(Some(7)), run(Some(7)));
    assert_ne!(run(Some(7)), run(Some(8)));
    assert_ne!(
        run(Some(7)),
        run(Some(7 | (1 << 32))),
        "the high 32 bits count"
    );
    assert_eq!(run(None), run(Some(0)));
    let seq = run(Some(7));
    assert!(
        seq.windows(2).any(|w| w[0] != w[1]),
        "positions give new draws"
    );
}

#[test]
fn rng_is_the_documented_pcg_hash() {
    // The same hash written with u64 arithmetic and masks.
    fn pcg64(v: u32) -> u32 {
        const M: u64 = 0xffff_ffff;
        let s = (u64::from(v) * 747_796_405 + 2_891_336_453) & M;
        let w = (((s >> ((s >> 28) + 4)) ^ s) * 277_803_737) & M;
        ((w >> 22) ^ w) as u32
    }
    for v in (0..2000u32).chain([u32::MAX, u32::MAX - 1, 1 << 31, 0xdead_beef]) {
        assert_eq!(pcg(v), pcg64(v), "pcg({v})");
    }
    // Known answers (computed independently, in Python), for the WGSL twin.
    assert_eq!(
        [pcg(0), pcg(1), pcg(2), pcg(u32::MAX)],
        [0x07bb_2fe2, 0xa8be_ea3c, 0x7a7e_cc88, 0xe62a_4902]
    );
    let u24 = |lo, hi, pos| (uniform(lo, hi, pos) * 16_777_216.0) as u32;
    assert_eq!(
        [
            u24(0, 0, 0),
            u24(0, 0, 1),
            u24(0, 0, 2),
            u24(99, 0, 0),
            u24(99, 0, 1)
        ],
        [8_379_828, 13_186_708, 11_841_002, 15_203_517, 12_172_930]
    );
    let mut sum = 0.0f64;
    for pos in 0..DRAWS {
        let u = uniform(1, 2, pos);
        assert!((0.0..1.0).contains(&u));
        let want = (pcg(pos ^ pcg(1 ^ pcg(2))) >> 8) as f64 / 16_777_216.0;
        assert_eq!(f64::from(u), want);
        sum += f64::from(u);
    }
    let mean = sum / f64::from(DRAWS);
    // Uniform: mean 1/2, standard deviation sqrt(1/12/N) ≈ 0.0014.
    assert!(
        (mean - 0.5).abs() < 5.0 * (1.0 / 12.0 / f64::from(DRAWS)).sqrt(),
        "{mean}"
    );
}

#[test]
fn resolve_gives_the_gpu_parameters() {
    assert_eq!(std::mem::size_of::<SamplerParams>(), 128);
    let d = SamplingOptions::default();
    assert!(d.is_greedy());
    let p = d.resolve(&[]).unwrap();
    assert!(p.greedy());
    assert_eq!(p.inv_temperature, 0.0);
    assert_eq!(p.top_k, MAX_CANDIDATES);
    assert_eq!((p.top_p, p.min_p), (1.0, 0.0));
    assert_eq!(
        (p.repeat, p.inv_repeat, p.frequency, p.presence),
        (1.0, 1.0, 0.0, 0.0)
    );
    assert_eq!((p.penalty_last_n, p.penalties_on), (64, 0));
    assert_eq!((p.seed_lo, p.seed_hi, p.n_stop), (0, 0, 0));

    let o = SamplingOptions {
        temperature: Some(0.7),
        top_k: Some(40),
        top_p: Some(0.9),
        min_p: Some(0.05),
        repetition_penalty: Some(1.3),
        frequency_penalty: Some(0.25),
        presence_penalty: Some(-0.5),
        penalty_last_n: Some(32),
        seed: Some(0x1234_5678_9abc_def0),
    };
    assert!(!o.is_greedy());
    let p = o.resolve(&[2, 49152]).unwrap();
    assert!(!p.greedy());
    assert_eq!(p.inv_temperature, 1.0f32 / 0.7);
    assert_eq!((p.top_k, p.top_p, p.min_p), (40, 0.9, 0.05));
    assert_eq!((p.repeat, p.inv_repeat), (1.3, 1.0f32 / 1.3));
    assert_eq!((p.frequency, p.presence), (0.25, -0.5));
    assert_eq!((p.penalty_last_n, p.penalties_on), (32, 1));
    assert_eq!((p.seed_lo, p.seed_hi), (0x9abc_def0, 0x1234_5678));
    assert_eq!(p.n_stop, 2);
    assert_eq!(&p.stop_ids[..3], &[2, 49152, 0]);
    assert_eq!((p.constrained, p._pad), (0, [0; 2]));

    // Penalties are on only with a non-empty window and a non-default penalty.
    let on = |o: SamplingOptions| o.resolve(&[]).unwrap().penalties_on;
    let pen = |f: fn(&mut SamplingOptions)| {
        let mut o = SamplingOptions::default();
        f(&mut o);
        on(o)
    };
    assert_eq!(pen(|o| o.repetition_penalty = Some(1.0)), 0);
    assert_eq!(pen(|o| o.repetition_penalty = Some(1.1)), 1);
    assert_eq!(pen(|o| o.frequency_penalty = Some(0.1)), 1);
    assert_eq!(pen(|o| o.presence_penalty = Some(0.1)), 1);
    assert_eq!(
        pen(|o| {
            o.presence_penalty = Some(0.1);
            o.penalty_last_n = Some(0);
        }),
        0
    );
    // topK 0 means 128; the largest stop-id list fits.
    assert_eq!(opts(1.0, 0, 1.0, 0.0).resolve(&[]).unwrap().top_k, 128);
    let stops: Vec<u32> = (0..MAX_STOP_IDS as u32).collect();
    let p = SamplingOptions::default().resolve(&stops).unwrap();
    assert_eq!((p.n_stop, p.stop_ids.to_vec()), (16, stops));
}

#[test]
fn bad_options_are_invalid_argument_errors_naming_the_option() {
    let with = |f: fn(&mut SamplingOptions)| {
        let mut o = SamplingOptions::default();
        f(&mut o);
        o
    };
    let bad: [(SamplingOptions, &str); 19] = [
        (with(|o| o.temperature = Some(-1.0)), "temperature"),
        (with(|o| o.temperature = Some(f32::NAN)), "temperature"),
        (with(|o| o.temperature = Some(f32::INFINITY)), "temperature"),
        (with(|o| o.temperature = Some(1e-40)), "temperature"),
        (with(|o| o.top_k = Some(129)), "topK"),
        (with(|o| o.top_p = Some(0.0)), "topP"),
        (with(|o| o.top_p = Some(1.01)), "topP"),
        (with(|o| o.top_p = Some(f32::NAN)), "topP"),
        (with(|o| o.min_p = Some(-0.1)), "minP"),
        (with(|o| o.min_p = Some(1.5)), "minP"),
        (with(|o| o.min_p = Some(f32::NAN)), "minP"),
        (
            with(|o| o.repetition_penalty = Some(0.0)),
            "repetitionPenalty",
        ),
        (
            with(|o| o.repetition_penalty = Some(-1.0)),
            "repetitionPenalty",
        ),
        (
            with(|o| o.repetition_penalty = Some(f32::INFINITY)),
            "repetitionPenalty",
        ),
        (
            with(|o| o.frequency_penalty = Some(f32::INFINITY)),
            "frequencyPenalty",
        ),
        (
            with(|o| o.frequency_penalty = Some(f32::NAN)),
            "frequencyPenalty",
        ),
        (
            with(|o| o.presence_penalty = Some(f32::NEG_INFINITY)),
            "presencePenalty",
        ),
        // Finite but large enough to overflow a penalised logit (a numerical failure that
        // would be the caller's, not the model's).
        (
            with(|o| o.repetition_penalty = Some(1e-39)),
            "repetitionPenalty",
        ),
        (
            with(|o| o.frequency_penalty = Some(1e30)),
            "frequencyPenalty",
        ),
    ];
    for (o, name) in bad {
        let e = o.resolve(&[]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{o:?}");
        assert!(e.to_string().contains(name), "{o:?}: {e}");
    }
    let e = SamplingOptions::default().resolve(&[0; 17]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    // The ends of every range are accepted.
    for o in [
        with(|o| o.temperature = Some(0.0)),
        with(|o| o.temperature = Some(f32::MIN_POSITIVE)),
        with(|o| o.top_k = Some(1)),
        with(|o| o.top_k = Some(128)),
        with(|o| o.top_p = Some(1.0)),
        with(|o| o.top_p = Some(1e-6)),
        with(|o| o.min_p = Some(0.0)),
        with(|o| o.min_p = Some(1.0)),
        with(|o| o.repetition_penalty = Some(1e-3)),
        with(|o| o.frequency_penalty = Some(-2.0)),
        with(|o| o.penalty_last_n = Some(0)),
        with(|o| o.seed = Some(u64::MAX)),
    ] {
        o.resolve(&[]).unwrap_or_else(|e| panic!("{o:?}: {e}"));
    }
}

#[test]
fn options_are_camel_case_json_with_every_field_optional() {
    assert_eq!(
        serde_json::to_string(&SamplingOptions::default()).unwrap(),
        "{}"
    );
    let o: SamplingOptions = serde_json::from_str("{}").unwrap();
    assert_eq!(o, SamplingOptions::default());
    let o: SamplingOptions = serde_json::from_str(
        r#"{"temperature":0.5,"topK":5,"topP":0.9,"minP":0.1,"repetitionPenalty":1.1,
            "frequencyPenalty":0.2,"presencePenalty":0.3,"penaltyLastN":16,"seed":42}"#,
    )
    .unwrap();
    assert_eq!(
        o,
        SamplingOptions {
            temperature: Some(0.5),
            top_k: Some(5),
            top_p: Some(0.9),
            min_p: Some(0.1),
            repetition_penalty: Some(1.1),
            frequency_penalty: Some(0.2),
            presence_penalty: Some(0.3),
            penalty_last_n: Some(16),
            seed: Some(42),
        }
    );
    let json = serde_json::to_string(&SamplingOptions {
        top_k: Some(5),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(json, r#"{"topK":5}"#);
}
