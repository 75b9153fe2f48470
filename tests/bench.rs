//! The benchmark and the profiler produce complete, consistent reports. Speed figures are not asserted here — they live in bench/results;
//! what is checked is that every strategy ran every workload with the same ids, and that the
//! dispatch and submit counts are the ones each strategy claims.
//!
//! Native only (the native lane owns this); in the browser, the bench page runs every strategy
//! through the npm package's bench() (tests/site/bench.test.mjs).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use fuselm::gguf::GgmlType;
use fuselm::gpu::GpuContext;
use fuselm::model::bench::{bench, GenerationBenchOptions};
use fuselm::model::synthetic::{synthetic_llama, SyntheticSpec};
use fuselm::model::{GpuModel, LoadOptions, Strategy};

/// Whether a host recording time was measured: above zero natively; in a browser, whose
/// `performance.now()` may be coarsened to 100 µs, at least not negative.
fn recording_timed(micros: f64) -> bool {
    if cfg!(target_arch = "wasm32") {
        micros >= 0.0 && micros.is_finite()
    } else {
        micros > 0.0
    }
}

async fn toy_bench_reports_every_strategy() {
    let options = GenerationBenchOptions {
        runs: Some(1),
        small_toy: Some(true),
        // 24 of the default 64 tokens: 12 generations on lavapipe (142 s of a slow machine's CI
        // at 64, 2026-11-29); the chunk ramp's first chunks still make several submits.
        toy_tokens: Some(24),
        ..Default::default()
    };
    let report = bench(None, &options).await.expect("bench");
    assert_eq!(
        report.results.len(),
        2 * 3,
        "2 sizes × 1 depth × 3 strategies"
    );
    for r in &report.results {
        let layers: u32 = if r.workload.contains(" L4") { 4 } else { 1 };
        assert!(r.ids_equal_across_strategies, "{}: ids differ", r.workload);
        assert_eq!(r.new_tokens, 24, "{}", r.workload);
        assert!(r.decode_tokens_per_second.median > 0.0 && r.time_to_first_token_ms.median > 0.0);
        assert!(
            r.end_to_end_tokens_per_second.median > 0.0,
            "{}",
            r.workload
        );
        match r.strategy {
            Strategy::Megakernel | Strategy::MegakernelGrid => {
                // The whole generation in one dispatch, one submission; on lavapipe a
                // dispatch may end early at its loop limit and the host records more.
                assert_eq!(r.dispatches_per_token, 0, "{}", r.workload);
                assert_eq!(
                    r.record_microseconds_per_token.median, 0.0,
                    "{}",
                    r.workload
                );
                assert!(r.speedup_vs_unfused.is_some_and(|s| s > 0.0));
            }
            Strategy::Fused => {
                // embed + 4 per layer + head + choose (greedy)
                assert_eq!(r.dispatches_per_token, 1 + 4 * layers + 2, "{}", r.workload);
                // The host's recording of the decode chunks is timed (in a browser the clock
                // may be coarser than one chunk's recording).
                assert!(
                    recording_timed(r.record_microseconds_per_token.min),
                    "{}",
                    r.workload
                );
                // Decode chunks of at least 4 steps (`ChunkRamp` keeps them that short where
                // the host's recording, not the GPU, is the bound; they grow up to 32 otherwise).
                assert!(
                    r.submits_per_token <= 0.3,
                    "{}: {}",
                    r.workload,
                    r.submits_per_token
                );
            }
            Strategy::Unfused => {
                assert_eq!(
                    r.dispatches_per_token,
                    1 + 15 * layers + 2,
                    "{}",
                    r.workload
                );
                assert_eq!(r.submits_per_token, 1.0, "{}", r.workload);
                assert_eq!(r.speedup_vs_unfused, Some(1.0));
                assert!(
                    recording_timed(r.record_microseconds_per_token.min),
                    "{}",
                    r.workload
                );
            }
        }
    }
    // The planner's pick is marked on exactly one row per workload, in the JSON and the table.
    let workloads: std::collections::BTreeSet<&str> =
        report.results.iter().map(|r| r.workload.as_str()).collect();
    for w in &workloads {
        let picked: Vec<_> = report
            .results
            .iter()
            .filter(|r| r.workload == *w && r.picked_by_auto)
            .collect();
        assert_eq!(picked.len(), 1, "{w}: {picked:?}");
    }
    assert_eq!(
        report.markdown.matches(" (auto) |").count(),
        workloads.len()
    );
    // One row per result, then one per planner warning (timing-dependent: not asserted).
    assert_eq!(
        report.markdown.lines().count(),
        2 + report.results.len() + report.planner_warnings.len()
    );
    assert!(report.notes.is_empty(), "{:?}", report.notes);
}
gpu_test!(
    toy_bench_reports_every_strategy_and_count,
    toy_bench_reports_every_strategy
);

async fn profile_covers_every_dispatch_of_a_step() {
    let spec = SyntheticSpec {
        n_layers: 3,
        matrix_types: vec![GgmlType::Q4_1],
        ..SyntheticSpec::default()
    };
    let file = synthetic_llama(&spec);
    let ctx = GpuContext::new().await.expect("gpu");
    let load = LoadOptions {
        n_ctx: Some(64),
        max_batch: Some(16),
        kv_f16: Some(false),
        strategy: None,
    };
    let mut model = GpuModel::load(ctx, &file, &load).await.expect("model");
    let p = model
        .profile(Strategy::Fused, &[1, 2, 3, 4, 5], 2)
        .await
        .expect("profile");
    assert_eq!(p.context, 9);
    let count = |role: &str| {
        p.roles
            .iter()
            .find(|r| r.role == role)
            .map_or(0, |r| r.dispatches_per_step)
    };
    for role in [
        "norm+qkv+rope",
        "attention+o-proj",
        "combine+norm+gate/up+swiglu",
        "down+residual+kv-append",
    ] {
        assert_eq!(count(role), 3, "{role}");
    }
    for role in ["norm+head+penalties", "sample-select", "sample-choose"] {
        assert_eq!(count(role), 1, "{role}");
    }
    assert!(p.roles.iter().all(|r| r.microseconds_per_step > 0.0));
    let sum: f64 = p.roles.iter().map(|r| r.microseconds_per_step).sum();
    assert!((sum - p.sum_of_roles_microseconds).abs() < 1e-6 * sum.max(1.0));
    assert!(p.step_microseconds > 0.0);
    let weights = p
        .roles
        .iter()
        .find(|r| r.role == "norm+head+penalties")
        .expect("head");
    assert_eq!(weights.bytes_per_step, model.head_bytes());
}
gpu_test!(
    profile_covers_every_dispatch,
    profile_covers_every_dispatch_of_a_step
);

async fn fused_limits_are_typed_errors_and_unfused_still_runs() {
    // 64 heads × 17 attention chunks (nCtx 4352): beyond the merge weights fused_ffn_up keeps
    // in workgroup memory (1024).
    let spec = SyntheticSpec {
        n_layers: 1,
        n_embd: 512,
        n_ff: 64,
        n_head: 64,
        n_head_kv: 64,
        context_length: 8192,
        matrix_types: vec![GgmlType::Q8_0],
        embedding_type: GgmlType::Q8_0,
        ..SyntheticSpec::default()
    };
    let file = synthetic_llama(&spec);
    let ctx = GpuContext::new().await.expect("gpu");
    let load = LoadOptions {
        n_ctx: Some(4352),
        max_batch: Some(8),
        kv_f16: Some(false),
        strategy: None,
    };
    let mut model = GpuModel::load(ctx, &file, &load).await.expect("model");
    let e = model
        .check_strategy(Strategy::Fused)
        .expect_err("fused must refuse 64 heads x 17 chunks");
    assert_eq!(e.kind(), fuselm::error::ErrorKind::LimitExceeded, "{e}");
    assert!(e.to_string().contains("attention chunks"), "{e}");
    // Asked for at load, a strategy that cannot run refuses the load with its reason.
    let pinned = LoadOptions {
        strategy: Some(Strategy::Fused),
        ..load.clone()
    };
    let ctx = GpuContext::new().await.expect("gpu");
    let e = GpuModel::load(ctx, &file, &pinned)
        .await
        .err()
        .expect("fused refused at load");
    assert_eq!(e.kind(), fuselm::error::ErrorKind::LimitExceeded, "{e}");
    let greedy = fuselm::sampling::SamplingOptions::default()
        .resolve(&[])
        .unwrap();
    let mut request = fuselm::model::GenerationRequest {
        prompt: &[1, 2, 3],
        max_tokens: 3,
        strategy: Strategy::Fused,
        sampler: greedy,
        chunk_tokens: 8,
        reuse_prefix: false,
        constraint: None,
        logprobs: None,
    };
    let e = model
        .generate(&request, &mut |_| true)
        .await
        .expect_err("fused");
    assert_eq!(e.kind(), fuselm::error::ErrorKind::LimitExceeded);
    request.strategy = Strategy::Unfused;
    let g = model
        .generate(&request, &mut |_| true)
        .await
        .expect("unfused still runs");
    assert_eq!(g.tokens.len(), 3);
}
gpu_test!(
    fused_limits_are_typed_errors,
    fused_limits_are_typed_errors_and_unfused_still_runs
);

async fn calibration_picks_the_fastest_and_can_be_reused() {
    use fuselm::error::ErrorKind;
    use fuselm::model::{CalibrateOptions, Calibration};
    let spec = SyntheticSpec {
        n_layers: 1,
        n_embd: 32,
        n_ff: 64,
        n_head: 2,
        n_head_kv: 2,
        matrix_types: vec![GgmlType::Q8_0],
        embedding_type: GgmlType::Q8_0,
        ..SyntheticSpec::default()
    };
    let file = synthetic_llama(&spec);
    let load = LoadOptions {
        n_ctx: Some(24),
        max_batch: Some(8),
        kv_f16: Some(false),
        strategy: None,
    };
    let mut model = GpuModel::load(GpuContext::new().await.expect("gpu"), &file, &load)
        .await
        .expect("model");

    // Out-of-range settings are typed errors and leave the model as it was.
    let planned = model.default_strategy();
    for bad in [
        CalibrateOptions {
            runs: Some(0),
            ..Default::default()
        },
        CalibrateOptions {
            tokens: Some(257),
            ..Default::default()
        },
    ] {
        let e = model.calibrate(&bad).await.expect_err("out of range");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    }
    assert_eq!(model.default_strategy(), planned);

    // 64 tokens asked, 24 - 8 prompt tokens fit.
    let c = model
        .calibrate(&CalibrateOptions {
            tokens: Some(64),
            runs: Some(1),
        })
        .await
        .expect("calibrate");
    assert_eq!((c.prompt_tokens, c.new_tokens, c.runs), (8, 16, 1));
    let timed: Vec<Strategy> = c.results.iter().map(|r| r.strategy).collect();
    assert_eq!(timed.len(), 3, "every strategy can run this model: {c:?}");
    assert!(c.skipped.is_empty(), "{:?}", c.skipped);
    let tps: Vec<f64> = c
        .results
        .iter()
        .map(|r| r.end_to_end_tokens_per_second.median)
        .collect();
    assert!(tps.iter().all(|t| *t > 0.0), "{tps:?}");
    assert!(
        tps.windows(2).all(|w| w[0] >= w[1]),
        "fastest first: {tps:?}"
    );
    assert_eq!(c.strategy, c.results[0].strategy);
    assert!(
        c.reason.starts_with(&format!(
            "{}: fastest in this device's calibration",
            c.strategy.name()
        )),
        "{}",
        c.reason
    );
    assert_eq!(model.default_strategy(), (c.strategy, c.reason.clone()));
    assert_eq!(c.key, model.calibration_key());
    // The model still generates what it generated before (greedy ids of every strategy agree).
    let greedy = fuselm::sampling::SamplingOptions::default()
        .resolve(&[])
        .unwrap();
    let mut ids = Vec::new();
    for strategy in [Strategy::Unfused, Strategy::Fused, Strategy::Megakernel] {
        let request = fuselm::model::GenerationRequest {
            prompt: &[1, 2, 3],
            max_tokens: 6,
            strategy,
            sampler: greedy,
            chunk_tokens: 6,
            reuse_prefix: false,
            constraint: None,
            logprobs: None,
        };
        ids.push(
            model
                .generate(&request, &mut |_| true)
                .await
                .expect("generate")
                .tokens,
        );
    }
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");

    // Cached and applied to a fresh load of the same model on the same adapter.
    // (JSON keeps the figures to ~1e-15: the fields that decide are compared exactly.)
    let saved: Calibration =
        serde_json::from_str(&serde_json::to_string(&c).unwrap()).expect("round trip");
    assert_eq!(
        (&saved.key, saved.strategy, &saved.reason),
        (&c.key, c.strategy, &c.reason)
    );
    assert_eq!(saved.results.len(), c.results.len());
    for (a, b) in saved.results.iter().zip(&c.results) {
        assert_eq!(a.strategy, b.strategy);
        let (x, y) = (
            a.end_to_end_tokens_per_second.median,
            b.end_to_end_tokens_per_second.median,
        );
        assert!((x - y).abs() <= 1e-9 * y, "{x} vs {y}");
    }
    // The strategy named at load is the default (`info.strategy`) until a calibration
    // replaces it.
    let pinned = LoadOptions {
        strategy: Some(Strategy::Megakernel),
        ..load.clone()
    };
    let mut again = GpuModel::load(GpuContext::new().await.expect("gpu"), &file, &pinned)
        .await
        .expect("model");
    let (s, why) = again.default_strategy();
    assert_eq!(s, Strategy::Megakernel, "{why}");
    assert!(why.contains("loaded with"), "{why}");
    again.use_calibration(&saved).expect("same key");
    assert_eq!(again.default_strategy(), (c.strategy, c.reason.clone()));

    // Not for another model (or a changed key): a typed error, the default stays.
    let other_load = LoadOptions {
        n_ctx: Some(32),
        strategy: Some(Strategy::Unfused),
        ..load
    };
    let mut other = GpuModel::load(GpuContext::new().await.expect("gpu"), &file, &other_load)
        .await
        .expect("model");
    let before = other.default_strategy();
    let e = other.use_calibration(&saved).expect_err("other context");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("ctx 24"), "{e}");
    assert_eq!(other.default_strategy(), before);
}
gpu_test!(
    calibration_picks_the_fastest,
    calibration_picks_the_fastest_and_can_be_reused
);

async fn bench_runs_only_the_strategies_asked() {
    // Invalid lists are typed errors before any work.
    for bad in [vec![], vec![Strategy::Fused, Strategy::Fused]] {
        let options = GenerationBenchOptions {
            strategies: Some(bad.clone()),
            ..Default::default()
        };
        let e = bench(None, &options).await.expect_err("invalid list");
        assert_eq!(
            e.kind(),
            fuselm::error::ErrorKind::InvalidArgument,
            "{bad:?}: {e}"
        );
    }
    // toyTokens out of range: a typed error naming the option as JavaScript writes it.
    for bad in [0, 121] {
        let options = GenerationBenchOptions {
            toy_tokens: Some(bad),
            ..Default::default()
        };
        let e = bench(None, &options)
            .await
            .expect_err("toyTokens out of range");
        assert_eq!(e.kind(), fuselm::error::ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("toyTokens"), "{e}");
    }
    let options = GenerationBenchOptions {
        runs: Some(1),
        small_toy: Some(true),
        toy_tokens: Some(16),
        strategies: Some(vec![Strategy::Fused, Strategy::Unfused]),
        ..Default::default()
    };
    let report = bench(None, &options).await.expect("bench");
    assert_eq!(
        report.results.len(),
        2 * 2,
        "2 sizes × 1 depth × 2 strategies"
    );
    for pair in report.results.chunks(2) {
        assert_eq!(pair[0].workload, pair[1].workload);
        assert!(
            pair[0].workload.ends_with(", 16 tokens"),
            "{}",
            pair[0].workload
        );
        assert_eq!((pair[0].new_tokens, pair[1].new_tokens), (16, 16));
        assert_eq!(
            (pair[0].strategy, pair[1].strategy),
            (Strategy::Fused, Strategy::Unfused),
            "{}: the order asked",
            pair[0].workload
        );
        assert!(pair[0].ids_equal_across_strategies, "{}", pair[0].workload);
        assert!(pair[0].speedup_vs_unfused.is_some_and(|s| s > 0.0));
        assert_eq!(pair[1].speedup_vs_unfused, Some(1.0));
    }
}
gpu_test!(
    bench_strategies_are_chosen,
    bench_runs_only_the_strategies_asked
);
