//! Population rollouts on the GPU against the CPU reference, natively and in the browser.
//!
//! For every environment × policy (linear, tanh MLP): the fused kernel (one dispatch per
//! episode) and the unfused one (one dispatch per step) agree with each other and with the CPU
//! reference (`sim::evaluate_cpu`) within the stated tolerance. (On lavapipe the two kernels are
//! bit-identical; NVIDIA's compiler contracts their arithmetic differently, and Acrobot's chaos
//! turns that into different episodes for some members.) Tolerance: the GPU
//! may contract a * b + c into one rounding (FMA) and its exp differs from Rust's by a few ULP,
//! and these dynamics amplify differences over hundreds of steps — so a member whose episode
//! ends on a threshold can end a step earlier or later. We require, per environment, the same
//! step count and a total reward within 1e-3 × max(1, |cpu|) for at least 95% of the members
//! (measured on lavapipe: 97.3–100%), and a mean |reward difference| below 1% of the mean
//! |reward|.

mod common;

use fuselm::gpu::GpuContext;
use fuselm::sim::gpu::{PopulationEvaluator, SimStrategy};
use fuselm::sim::{evaluate_cpu, CustomEnv, Env, Fitness, Policy, PopulationSpec};

/// Deterministic parameters in [-scale, scale).
fn params(n: usize, seed: u32, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((s >> 8) as f32 / 16_777_216.0 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn agreement(cpu: &[Fitness], gpu: &[Fitness]) -> (f64, f64, f64) {
    let mut same = 0;
    let (mut diff, mut mag) = (0f64, 0f64);
    for (c, g) in cpu.iter().zip(gpu) {
        let tol = 1e-3 * c.total_reward.abs().max(1.0);
        if c.steps == g.steps && (c.total_reward - g.total_reward).abs() <= tol {
            same += 1;
        }
        diff += f64::from((c.total_reward - g.total_reward).abs());
        mag += f64::from(c.total_reward.abs());
    }
    let n = cpu.len() as f64;
    (same as f64 / n, diff / n, mag / n)
}

async fn gpu_matches_cpu_reference() {
    let ctx = GpuContext::new().await.expect("gpu");
    let cases = [
        (Env::CartPole, Policy::Linear, 500, 1.0),
        (Env::CartPole, Policy::Mlp { hidden: 16 }, 500, 1.0),
        (Env::Acrobot, Policy::Linear, 500, 1.0),
        (Env::Acrobot, Policy::Mlp { hidden: 8 }, 200, 1.0),
        // Random linear policies never reach MountainCar's flag: these pump energy (push along
        // the velocity), perturbed per member.
        (Env::MountainCar, Policy::Linear, 200, 1.0),
        (Env::MountainCar, Policy::Mlp { hidden: 8 }, 200, 1.0),
        (Env::Pendulum, Policy::Linear, 200, 1.0),
        (Env::Pendulum, Policy::Mlp { hidden: 16 }, 200, 1.0),
        (Env::Rastrigin { dim: 30 }, Policy::Linear, 1, 5.12),
        (Env::CartPole, Policy::Recurrent { hidden: 8 }, 500, 1.0),
        (Env::Pendulum, Policy::Recurrent { hidden: 4 }, 200, 1.0),
    ];
    for (i, (env, policy, episode_length, scale)) in cases.into_iter().enumerate() {
        let spec = PopulationSpec {
            env: env.clone(),
            policy,
            // Fewer members in the browser: SwiftShader runs them on the CPU.
            population: if cfg!(target_arch = "wasm32") {
                100
            } else {
                300
            },
            episode_length,
            seed: 17 + i as u32,
        };
        let mut p = params(
            (spec.population * spec.parameters()) as usize,
            i as u32,
            scale,
        );
        if env == Env::MountainCar && policy == Policy::Linear {
            // outputs (left, none, right) = (-100 v, 0, 100 v) + noise
            for m in p.chunks_mut(9) {
                m[1] -= 100.0;
                m[5] += 100.0;
            }
        }
        let cpu = evaluate_cpu(&spec, &p).expect("cpu");
        if let Policy::Recurrent { hidden } = policy {
            // The recurrent weights matter: without them (Wh = 0) the episodes change.
            let (o, h) = (env.observations() as usize, hidden as usize);
            let n = spec.parameters() as usize;
            let mut forgetful = p.clone();
            for m in forgetful.chunks_mut(n) {
                m[h * o..h * o + h * h].fill(0.0);
            }
            let without = evaluate_cpu(&spec, &forgetful).expect("cpu");
            assert_ne!(without, cpu, "{env:?}: the recurrent state changes nothing");
        }
        let eval = PopulationEvaluator::new(&ctx, &spec)
            .await
            .expect("compile");
        let fused = eval
            .evaluate(&ctx, &p, spec.seed, SimStrategy::Fused)
            .await
            .expect("fused");
        let unfused = eval
            .evaluate(&ctx, &p, spec.seed, SimStrategy::Unfused)
            .await
            .expect("unfused");
        let (same_strategies, ..) = agreement(&unfused, &fused);
        assert!(
            same_strategies >= 0.95,
            "{env:?} {policy:?}: fused and unfused agree on {same_strategies} of members"
        );
        for (name, gpu) in [("fused", &fused), ("unfused", &unfused)] {
            let (same, diff, mag) = agreement(&cpu, gpu);
            assert!(
                same >= 0.95,
                "{env:?} {policy:?} {name}: only {same} of members agree"
            );
            assert!(
                diff <= 0.01 * mag.max(1.0),
                "{env:?} {policy:?} {name}: mean |Δreward| {diff} vs mean |reward| {mag}"
            );
        }
        let (same, diff, mag) = agreement(&cpu, &fused);
        let steps: u32 = cpu.iter().map(|f| f.steps).sum();
        println!(
            "{env:?} {policy:?}: {:.1}% members equal (fused vs CPU), fused == unfused: {}, mean |Δreward| {diff:.2e} (mean |reward| {mag:.1}), {} mean steps",
            same * 100.0,
            fused == unfused,
            steps / spec.population
        );
        // The episodes are not trivial: rewards differ between members (random MLPs never
        // reach MountainCar's flag).
        let first = cpu[0].total_reward;
        if policy == Policy::Linear || env != Env::MountainCar {
            assert!(
                cpu.iter().any(|f| f.total_reward != first),
                "{env:?}: every member got {first}"
            );
        }
        // Another seed draws other initial states (Rastrigin has none).
        if !matches!(env, Env::Rastrigin { .. }) {
            let other = eval
                .evaluate(&ctx, &p, spec.seed + 1, SimStrategy::Fused)
                .await
                .expect("fused");
            assert_ne!(other, fused, "{env:?}: seed changes nothing");
        }
    }
    // Natively every built-in kernel's loops are proved to terminate (src/gpu/loop_proof.rs),
    // so none is compiled with forced loop bounding.
    #[cfg(not(target_arch = "wasm32"))]
    assert_eq!(ctx.unproven_loops(), Vec::<String>::new());
}
gpu_test!(
    fused_and_unfused_rollouts_match_the_cpu_reference,
    gpu_matches_cpu_reference
);

/// Every call evaluates its own parameters: the upload buffer reused across calls (or the
/// fallback when it is away) never hands a call the previous call's parameters.
async fn calls_see_their_own_parameters() {
    let ctx = GpuContext::new().await.expect("gpu");
    let spec = PopulationSpec {
        env: Env::Pendulum,
        policy: Policy::Mlp { hidden: 8 },
        population: 64,
        episode_length: 50,
        seed: 3,
    };
    let n = (spec.population * spec.parameters()) as usize;
    let (a, b) = (params(n, 1, 1.0), params(n, 2, 1.0));
    let (cpu_a, cpu_b) = (
        evaluate_cpu(&spec, &a).expect("cpu"),
        evaluate_cpu(&spec, &b).expect("cpu"),
    );
    assert_ne!(cpu_a, cpu_b);
    let eval = PopulationEvaluator::new(&ctx, &spec)
        .await
        .expect("compile");
    let mut first: Vec<Vec<_>> = Vec::new();
    for (round, strategy) in [SimStrategy::Fused, SimStrategy::Unfused, SimStrategy::Fused]
        .into_iter()
        .enumerate()
    {
        for (name, p, cpu) in [("a", &a, &cpu_a), ("b", &b, &cpu_b)] {
            let got = eval
                .evaluate(&ctx, p, spec.seed, strategy)
                .await
                .expect("evaluate");
            let (same, ..) = agreement(cpu, &got);
            assert!(
                same >= 0.95,
                "round {round} {name}: {same} of members agree"
            );
            if round == 0 {
                first.push(got);
            } else if strategy == SimStrategy::Fused {
                let i = usize::from(name == "b");
                assert_eq!(
                    got, first[i],
                    "round {round} {name}: not the first call's result"
                );
            }
        }
    }
}
gpu_test!(
    every_call_evaluates_its_own_parameters,
    calls_see_their_own_parameters
);

/// Bad input gets a typed error and leaves the evaluator usable.
async fn bad_input_is_refused() {
    let ctx = GpuContext::new().await.expect("gpu");
    let spec = PopulationSpec {
        env: Env::CartPole,
        policy: Policy::Linear,
        population: 4,
        episode_length: 10,
        seed: 1,
    };
    let eval = PopulationEvaluator::new(&ctx, &spec)
        .await
        .expect("compile");
    let err = eval
        .evaluate(&ctx, &[0.0; 3], 1, SimStrategy::Fused)
        .await
        .expect_err("wrong params length");
    assert!(err.to_string().contains("4 × 10 = 40"), "{err}");
    let ok = eval
        .evaluate(&ctx, &[0.0; 40], 1, SimStrategy::Fused)
        .await
        .expect("still usable");
    assert_eq!(ok.len(), 4);
    for bad in [
        PopulationSpec {
            population: 0,
            ..spec.clone()
        },
        PopulationSpec {
            policy: Policy::Mlp { hidden: 1000 },
            ..spec.clone()
        },
    ] {
        assert!(PopulationEvaluator::new(&ctx, &bad).await.is_err());
    }
}
gpu_test!(bad_simulation_input_is_refused, bad_input_is_refused);

/// Evolution strategies on the GPU (every generation in one pass) against the CPU reference on
/// Rastrigin (no dynamics, so ranks are stable): the mean after 4 generations agrees within
/// 1e-3; and on CartPole the GPU loop learns (the mean reward rises well above a random
/// policy's and some member balances the pole for the whole episode).
async fn es_matches_cpu_and_learns() {
    use fuselm::sim::es::{es_cpu, es_gpu, EsOptions};
    let ctx = GpuContext::new().await.expect("gpu");
    let spec = PopulationSpec {
        env: Env::Rastrigin { dim: 10 },
        policy: Policy::Linear,
        population: 64,
        episode_length: 1,
        seed: 3,
    };
    let theta0 = params(10, 99, 3.0);
    let o = EsOptions {
        generations: 4,
        sigma: 0.3,
        learning_rate: 0.5,
        seed: 11,
    };
    let cpu = es_cpu(&spec, &theta0, &o).expect("cpu es");
    let eval = PopulationEvaluator::new(&ctx, &spec)
        .await
        .expect("compile");
    let gpu = es_gpu(&ctx, &eval, &theta0, &o).await.expect("gpu es");
    for (c, g) in cpu.theta.iter().zip(&gpu.theta) {
        assert!((c - g).abs() <= 1e-3 * c.abs().max(1.0), "theta {c} vs {g}");
    }
    for (c, g) in cpu.stats.iter().zip(&gpu.stats) {
        assert!(
            (c.mean_reward - g.mean_reward).abs() <= 1e-3 * c.mean_reward.abs().max(1.0),
            "{c:?} vs {g:?}"
        );
    }
    assert_ne!(cpu.theta, theta0, "ES moved nothing");
    println!("rastrigin ES: {:?}", gpu.stats);

    let spec = PopulationSpec {
        env: Env::CartPole,
        policy: Policy::Linear,
        population: 128,
        episode_length: 200,
        seed: 5,
    };
    let eval = PopulationEvaluator::new(&ctx, &spec)
        .await
        .expect("compile");
    let o = EsOptions {
        generations: 40,
        sigma: 0.5,
        learning_rate: 0.3,
        seed: 7,
    };
    let run = es_gpu(&ctx, &eval, &[0.0; 10], &o).await.expect("gpu es");
    #[cfg(not(target_arch = "wasm32"))]
    assert_eq!(ctx.unproven_loops(), Vec::<String>::new());
    let first = run.stats[0].mean_reward;
    let last = run.stats.last().unwrap().mean_reward;
    let best = run.stats.iter().map(|s| s.best_reward).fold(0.0, f32::max);
    println!("cartpole ES: mean reward {first} -> {last}, best {best}");
    assert!(
        last > 2.0 * first && last >= 60.0,
        "no learning: {first} -> {last}"
    );
    assert_eq!(best, 200.0, "no member balanced the whole episode");
}
gpu_test!(
    evolution_strategies_match_cpu_and_learn_cartpole,
    es_matches_cpu_and_learns
);

/// CartPole's own WGSL made into a user environment (a 4-float observation, as a user writes
/// it).
fn custom_cartpole() -> CustomEnv {
    let wgsl = fuselm::shaders::SIM_ENV_CARTPOLE
        .replace(
            "fn env_observe(s: array<f32, 4>) -> array<f32, 8> {",
            "fn env_observe(s: array<f32, STATE_LEN>) -> array<f32, OBS_LEN> {",
        )
        .replace(
            "array<f32, 8>(s[0], s[1], s[2], s[3], 0.0, 0.0, 0.0, 0.0)",
            "array<f32, OBS_LEN>(s[0], s[1], s[2], s[3])",
        );
    assert!(
        wgsl.contains("OBS_LEN>(s[0]"),
        "CartPole's WGSL changed; update this test"
    );
    CustomEnv {
        wgsl,
        state_size: 4,
        observations: 4,
        actions: Some(2),
    }
}

/// A 1-D point mass pushed towards the origin: 2 state floats, 1 continuous action, a random
/// start; `point_mass_cpu` is its Rust transcription.
const POINT_MASS: &str = "
fn env_init(seed: u32, member: u32) -> array<f32, STATE_LEN> {
    return array<f32, STATE_LEN>(sim_uniform(seed, member, 0u, -1.0, 1.0), 0.0);
}
fn env_observe(s: array<f32, STATE_LEN>) -> array<f32, OBS_LEN> {
    return s;
}
fn env_step(s: array<f32, STATE_LEN>, action: f32) -> EnvStep {
    var out: EnvStep;
    let v = s[1] + 0.1 * action;
    out.s = array<f32, STATE_LEN>(s[0] + 0.1 * v, v);
    out.reward = -(out.s[0] * out.s[0]);
    out.terminated = abs(out.s[0]) > 2.0;
    return out;
}
";

fn point_mass_cpu(seed: u32, member: u32, p: &[f32], episode_length: u32) -> Fitness {
    use fuselm::sim::math::{tanh, uniform_in};
    let (mut x, mut v) = (uniform_in(seed, member, 0, -1.0, 1.0), 0.0f32);
    let (mut total, mut steps) = (0.0f32, 0);
    for _ in 0..episode_length {
        let action = tanh(p[0] * x + p[1] * v + p[2]);
        v += 0.1 * action;
        x += 0.1 * v;
        total += -(x * x);
        steps += 1;
        if x.abs() > 2.0 {
            break;
        }
    }
    Fitness {
        total_reward: total,
        steps,
    }
}

/// User environments in WGSL: CartPole written as a user environment gives the built-in
/// CartPole's fitness (same tolerance as the CPU reference; on lavapipe identical), a point
/// mass with its own state size and a continuous action matches its Rust transcription under
/// both strategies, and bad environments get `invalid-argument` errors that say what is wrong,
/// leaving the context usable.
async fn custom_environments() {
    let ctx = GpuContext::new().await.expect("gpu");
    let population = if cfg!(target_arch = "wasm32") {
        100
    } else {
        300
    };
    let builtin = PopulationSpec {
        env: Env::CartPole,
        policy: Policy::Mlp { hidden: 8 },
        population,
        episode_length: 300,
        seed: 4,
    };
    let custom = PopulationSpec {
        env: Env::Custom(custom_cartpole()),
        ..builtin.clone()
    };
    let p = params((population * builtin.parameters()) as usize, 8, 1.0);
    let want = PopulationEvaluator::new(&ctx, &builtin)
        .await
        .expect("compile")
        .evaluate(&ctx, &p, 4, SimStrategy::Fused)
        .await
        .expect("built-in");
    let eval = PopulationEvaluator::new(&ctx, &custom)
        .await
        .expect("compile the custom CartPole");
    for strategy in [SimStrategy::Fused, SimStrategy::Unfused] {
        let got = eval.evaluate(&ctx, &p, 4, strategy).await.expect("custom");
        let (same, _, _) = agreement(&want, &got);
        let identical = want.iter().zip(&got).filter(|(a, b)| a == b).count();
        println!("custom CartPole {strategy:?}: {identical} of {population} identical");
        assert!(same >= 0.95, "{strategy:?}: {same} agree");
    }

    let spec = PopulationSpec {
        env: Env::Custom(CustomEnv {
            wgsl: POINT_MASS.into(),
            state_size: 2,
            observations: 2,
            actions: None,
        }),
        policy: Policy::Linear,
        population,
        episode_length: 100,
        seed: 9,
    };
    assert_eq!(spec.parameters(), 3);
    let p = params((population * 3) as usize, 21, 3.0);
    let cpu: Vec<Fitness> = p
        .chunks(3)
        .enumerate()
        .map(|(m, w)| point_mass_cpu(9, m as u32, w, 100))
        .collect();
    assert!(
        cpu.iter().any(|f| f.steps < 100),
        "no member left the track"
    );
    let eval = PopulationEvaluator::new(&ctx, &spec)
        .await
        .expect("compile the point mass");
    for strategy in [SimStrategy::Fused, SimStrategy::Unfused] {
        let got = eval
            .evaluate(&ctx, &p, 9, strategy)
            .await
            .expect("point mass");
        let (same, diff, mag) = agreement(&cpu, &got);
        println!("point mass {strategy:?}: {same} agree, mean |diff| {diff:.2e} of {mag:.2}");
        assert!(
            same >= 0.95 && diff < 0.01 * mag,
            "{strategy:?}: {same}, {diff}"
        );
    }
    let err = evaluate_cpu(&spec, &p).expect_err("no CPU reference");
    assert!(err.to_string().contains("no CPU reference"), "{err}");

    let with = |wgsl: &str, state_size: u32| PopulationSpec {
        env: Env::Custom(CustomEnv {
            wgsl: wgsl.into(),
            state_size,
            observations: 2,
            actions: None,
        }),
        ..spec.clone()
    };
    let cases = [
        (
            with(&POINT_MASS.replace("fn env_step", "fn env_stop"), 2),
            "env_step is missing",
        ),
        (
            with(&POINT_MASS.replace("return s;", "return s"), 2),
            "does not compile",
        ),
        // the declared state size disagrees with what env_init builds
        (with(POINT_MASS, 3), "does not compile"),
        (
            with(
                &format!("@group(0) @binding(9) var<uniform> x: f32;\n{POINT_MASS}"),
                2,
            ),
            "may not declare bindings",
        ),
        (with(POINT_MASS, 0), "stateSize must be 1..=16"),
    ];
    for (bad, message) in cases {
        let err = match PopulationEvaluator::new(&ctx, &bad).await {
            Ok(_) => panic!("accepted: {message}"),
            Err(e) => e,
        };
        assert_eq!(err.kind().as_str(), "invalid-argument", "{err}");
        assert!(err.to_string().contains(message), "{message}: {err}");
    }
    // Still usable.
    let again = eval
        .evaluate(&ctx, &p, 9, SimStrategy::Fused)
        .await
        .expect("again");
    assert_eq!(again.len(), population as usize);
}
gpu_test!(
    user_wgsl_environments_run_and_are_validated,
    custom_environments
);
