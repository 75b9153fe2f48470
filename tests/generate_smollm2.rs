//! The real SmolLM2-135M-Instruct Q4_1 on the GPU (lavapipe here) against the exact reference:
//! `tests/fixtures/exact/smollm2/exact_greedy.jsonl`, the model evaluated in float64 by an
//! independent implementation (Hugging Face transformers on gguf-py's dequantized weights; its
//! float32 twin differs by <= 1e-4 per logit with identical greedy ids).
//!
//! The rule (shared fixtures README), on all ten prompts including the two of ~270 tokens:
//! * greedy: every strategy's ids equal the reference up to 64 tokens (or its end), or up to the
//!   first position whose reference top-2 margin is below 0.01;
//! * teacher forcing over `prompt_ids + greedy_ids`: the argmax equals the reference at every
//!   position with margin >= 0.01 (the prefill path every strategy shares);
//! * the first steps' top-5 logits are within `TOP5_TOLERANCE` of the reference's.
//!
//! On lavapipe (CI) a generation of 64 tokens takes minutes, so each strategy is its own test
//! with its own prompts (`CI_PROMPTS`), teacher forcing (the prefill path every strategy shares)
//! covers the shortest sequence (`CI_FORCED`), and each generation stops at its CI cap or the
//! rule's last token. `FUSELM_EXACT_ALL=1` runs every strategy and teacher forcing on all ten
//! prompts and measures the f16 KV cache (done on the GPU machine: `bench/gpu exact-reference`).
//!
//! llama.cpp (tests/fixtures/llama.cpp) stays a loose cross-check: it rounds activations to 8
//! bits (|Δlogit| up to ~0.57 from exact), so its greedy ids are compared only up to its first
//! top-2 margin below 0.6.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::exact::{greedy_cases, GreedyCase};
use fuselm::gguf::Gguf;
use fuselm::gpu::GpuContext;
use fuselm::model::{GenerationRequest, GpuModel, LoadOptions, StopReason, Strategy};
use fuselm::sampling::SamplingOptions;

const MARGIN: f64 = 0.01;
const TOP5_TOLERANCE: f64 = 2e-3;
const LLAMA_CPP_NOISE: f64 = 0.6;
const MAX_TOKENS: usize = 64;
/// Prompts (indices into the fixture) each strategy generates from on CI: fused (the default on
/// GPUs) on the shortest prompt (its rule covers 30 tokens), unfused on a plain prompt whose rule
/// covers 39, the megakernel on the code prompt (17 tokens), each up to its CI cap (the last
/// field). The grid megakernel's code path is checked on the synthetic models (lavapipe runs it
/// with one workgroup); on SmolLM2 on GPUs (FUSELM_EXACT_ALL, every strategy on all ten
/// prompts). Fused across a 256-position
/// attention chunk is checked against the CPU reference in tests/model_synthetic.rs.
/// 2026-11-28: fused ran the 64-token chat prompt (194 s of CI) and the megakernel the
/// 30-token one (87 s); the decode kernels are the same whatever the prompt. 2026-11-29: unfused
/// ran the ~270-token prompt 9 (174–871 s of CI by the machine; its prefill is the batched path
/// teacher forcing checks), now prompt 5.
/// 2026-11-29, later: on CI each strategy checks the rule's first 16 ids (fused's 30 ids took
/// 276 s of lavapipe beside other tests, unfused's 39 168 s), the megakernel (one workgroup:
/// serial on lavapipe, 217 s of CI on a slow machine) its first 8; the whole rule on every
/// prompt on GPUs (`FUSELM_EXACT_ALL=1`).
const CI_PROMPTS: [(Strategy, &[usize], usize); 3] = [
    (Strategy::Fused, &[0], 16),
    (Strategy::Unfused, &[5], 16),
    (Strategy::Megakernel, &[2], 8),
];
/// Prompts whose reference sequence is teacher-forced on CI: the one whose rule covers its
/// whole sequence (35 positions, two 32-token tiles of the prefill matmul). Four of them (279
/// positions) took 121–862 s of CI by the machine (2026-11-29: lavapipe's speed differs ~3×
/// between this project's machines); a plain and a chat prompt (0 and 7, 139 positions) 226 s
/// on the slow one, prompts 0 and 2 (60 positions) 220 s beside other tests. The ids of a chat
/// prompt are ids like any other here (rendering: tests/chat_template.rs, tests/text_model.rs).
/// Everything with FUSELM_EXACT_ALL=1 (the GPU machine).
const CI_FORCED: [usize; 1] = [0];

fn load(path: &str) -> Vec<GreedyCase> {
    let path = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    greedy_cases(&std::fs::read_to_string(path).unwrap())
}

/// Greedy ids of `strategy`, at most `max_tokens`, with the stop id appended when it ended the
/// generation (the reference includes its stop token 0 or 2).
async fn greedy(
    gpu: &mut GpuModel,
    strategy: Strategy,
    prompt: &[u32],
    max_tokens: usize,
) -> Vec<u32> {
    let request = GenerationRequest {
        prompt,
        max_tokens: max_tokens as u32,
        strategy,
        sampler: SamplingOptions::default().resolve(&[0, 2]).unwrap(),
        chunk_tokens: 16,
        reuse_prefix: false,
        constraint: None,
        logprobs: None,
    };
    let out = gpu.generate(&request, &mut |_| true).await.unwrap();
    assert_eq!(
        out.stop_token.is_some(),
        out.stop_reason == StopReason::EndOfGeneration
    );
    out.tokens.iter().copied().chain(out.stop_token).collect()
}

fn exact_all() -> bool {
    std::env::var("FUSELM_EXACT_ALL").is_ok_and(|v| v == "1")
}

fn options() -> LoadOptions {
    LoadOptions {
        n_ctx: Some(384),
        max_batch: Some(352),
        kv_f16: Some(false),
        strategy: None,
    }
}

async fn load_model(options: &LoadOptions) -> GpuModel {
    let bytes = std::fs::read(common::default_model()).unwrap();
    let gguf = Gguf::parse(&bytes).unwrap();
    let ctx = GpuContext::new().await.unwrap();
    GpuModel::load_parsed(ctx, &gguf, &bytes, options)
        .await
        .unwrap()
}

/// `strategy`'s greedy ids equal the reference under the rule on its CI prompts (all ten with
/// `FUSELM_EXACT_ALL=1`).
fn greedy_meets_the_exact_reference(strategy: Strategy) {
    pollster::block_on(async {
        let mut gpu = load_model(&options()).await;
        // The prompts and the cap on the rule's ids: all ten and none with FUSELM_EXACT_ALL=1.
        let (prompts, cap): (Vec<usize>, usize) = if exact_all() {
            ((0..10).collect(), MAX_TOKENS)
        } else {
            CI_PROMPTS
                .iter()
                .find(|(s, _, _)| *s == strategy)
                .map(|(_, p, cap)| (p.to_vec(), *cap))
                .unwrap_or_default()
        };
        let cases = load("exact/smollm2/exact_greedy.jsonl");
        assert_eq!(cases.len(), 10);
        for index in prompts {
            let case = &cases[index];
            let n_rule = case
                .first_below(MARGIN)
                .min(MAX_TOKENS)
                .min(case.greedy_ids.len())
                .min(cap);
            let got = greedy(&mut gpu, strategy, &case.prompt_ids, n_rule).await;
            let n = n_rule.min(got.len());
            assert_eq!(
                got[..n],
                case.greedy_ids[..n],
                "{:?}: {strategy:?} greedy ids (rule: first {n_rule})",
                case.prompt
            );
            assert!(
                n == n_rule,
                "{:?}: {strategy:?} produced {} ids, the rule needs {n_rule}",
                case.prompt,
                got.len()
            );
            println!(
                "{:?}: {strategy:?} equal to the exact reference for {n} tokens (rule: {n_rule})",
                case.prompt
            );
        }
    });
}

#[test]
fn fused_meets_the_exact_reference() {
    greedy_meets_the_exact_reference(Strategy::Fused);
}

#[test]
fn unfused_meets_the_exact_reference() {
    greedy_meets_the_exact_reference(Strategy::Unfused);
}

#[test]
fn megakernel_meets_the_exact_reference() {
    greedy_meets_the_exact_reference(Strategy::Megakernel);
}

/// Every strategy of `Strategy::ALL` is held to the reference: on CI by the tests above; with
/// `FUSELM_EXACT_ALL=1` (GPUs) the grid megakernel too.
#[test]
fn every_strategy_is_checked() {
    for &strategy in Strategy::ALL {
        let on_ci = CI_PROMPTS.iter().any(|(s, _, _)| *s == strategy);
        assert!(
            on_ci || strategy == Strategy::MegakernelGrid,
            "{strategy:?} has no exact-reference test"
        );
    }
    if exact_all() {
        greedy_meets_the_exact_reference(Strategy::MegakernelGrid);
    }
}

/// Teacher forcing over `prompt_ids + greedy_ids` (the batched prefill every strategy starts
/// from) of the `CI_FORCED` prompts, all ten with `FUSELM_EXACT_ALL=1`: the argmax equals the
/// reference wherever its margin is >= 0.01, and the first steps' top-5 logits are within
/// `TOP5_TOLERANCE`.
#[test]
fn teacher_forcing_meets_the_exact_reference() {
    pollster::block_on(async {
        let mut gpu = load_model(&options()).await;
        let vocab = gpu.config().vocab_size as usize;
        let (mut forced, mut max_top5) = (0usize, 0f64);
        let all = exact_all();
        for (index, case) in load("exact/smollm2/exact_greedy.jsonl")
            .into_iter()
            .enumerate()
        {
            if !all && !CI_FORCED.contains(&index) {
                continue;
            }
            // Teacher forcing over the reference sequence.
            let seq: Vec<u32> = case
                .prompt_ids
                .iter()
                .chain(&case.greedy_ids)
                .copied()
                .collect();
            let logits = gpu.all_logits(&seq).await.unwrap();
            let p = case.prompt_ids.len();
            for (i, &want) in case.greedy_ids.iter().enumerate() {
                let row = &logits[(p + i - 1) * vocab..(p + i) * vocab];
                for &(id, logit) in case.top5.get(i).map(Vec::as_slice).unwrap_or(&[]) {
                    let d = (f64::from(row[id as usize]) - logit).abs();
                    max_top5 = max_top5.max(d);
                    assert!(
                        d < TOP5_TOLERANCE,
                        "{:?} step {i} token {id}: {} vs exact {logit}",
                        case.prompt,
                        row[id as usize]
                    );
                }
                if case.margins[i] >= MARGIN {
                    forced += 1;
                    let ours = fuselm::reference::argmax(row).unwrap() as u32;
                    assert_eq!(ours, want, "{:?}: teacher-forced position {i}", case.prompt);
                }
            }
        }
        println!(
            "teacher forcing: argmax equal at all {forced} positions with margin >= {MARGIN}; \
             max |logit - exact| on first-step top-5: {max_top5:.2e}"
        );
    });
}

/// The f16 KV cache (GPU machine, adapters with shader-f16; `FUSELM_EXACT_ALL=1`): rounding K
/// and V to f16 is not exact, so its agreement is measured and stated rather than held to the rule.
#[test]
fn f16_kv_cache_agreement_is_measured() {
    if !exact_all() {
        return;
    }
    pollster::block_on(async {
        let bytes = std::fs::read(common::default_model()).unwrap();
        let gguf = Gguf::parse(&bytes).unwrap();
        let options = options();
        let ctx = GpuContext::new().await.unwrap();
        if ctx.has(wgpu::Features::SHADER_F16) {
            let f16_options = LoadOptions {
                kv_f16: Some(true),
                ..options
            };
            let mut f16 = GpuModel::load_parsed(ctx, &gguf, &bytes, &f16_options)
                .await
                .unwrap();
            let vocab = f16.config().vocab_size as usize;
            let (mut rule_met, mut cases, mut agree, mut positions) = (0, 0, 0usize, 0usize);
            let mut max_diff = 0f64;
            for case in load("exact/smollm2/exact_greedy.jsonl") {
                let n_rule = case
                    .first_below(MARGIN)
                    .min(MAX_TOKENS)
                    .min(case.greedy_ids.len());
                let got = greedy(&mut f16, Strategy::Fused, &case.prompt_ids, MAX_TOKENS).await;
                let same = got
                    .iter()
                    .zip(&case.greedy_ids)
                    .take_while(|(a, b)| a == b)
                    .count();
                cases += 1;
                rule_met += usize::from(same >= n_rule);
                let seq: Vec<u32> = case
                    .prompt_ids
                    .iter()
                    .chain(&case.greedy_ids)
                    .copied()
                    .collect();
                let logits = f16.all_logits(&seq).await.unwrap();
                let p = case.prompt_ids.len();
                for (i, &want) in case.greedy_ids.iter().enumerate() {
                    let row = &logits[(p + i - 1) * vocab..(p + i) * vocab];
                    for &(id, logit) in case.top5.get(i).map(Vec::as_slice).unwrap_or(&[]) {
                        max_diff = max_diff.max((f64::from(row[id as usize]) - logit).abs());
                    }
                    if case.margins[i] >= MARGIN {
                        positions += 1;
                        agree +=
                            usize::from(fuselm::reference::argmax(row).unwrap() as u32 == want);
                    }
                }
            }
            println!(
                "f16 KV cache: greedy rule met on {rule_met}/{cases} prompts; teacher forcing \
                 {agree}/{positions} at margin >= {MARGIN}; max |logit - exact| on first-step \
                 top-5: {max_diff:.2e}"
            );
            assert!(
                agree as f64 >= 0.97 * positions as f64,
                "f16 KV agreement collapsed"
            );
        }
    });
}

/// llama.cpp cross-check: fused greedy ids up to llama.cpp's first margin below its noise, on
/// five prompts. GPU machine only (`FUSELM_EXACT_ALL=1`): fused meets the exact reference above
/// on CI, and this looser check cost 122 s of lavapipe there for one prompt (2026-11-29).
#[test]
fn fused_agrees_with_llama_cpp_before_its_noise() {
    if !exact_all() {
        println!("skipped: FUSELM_EXACT_ALL=1 runs it (the GPU machine)");
        return;
    }
    pollster::block_on(async {
        let mut gpu = load_model(&options()).await;
        for case in load("llama.cpp/smollm2/greedy.jsonl").into_iter().take(5) {
            let n_noise = case.first_below(LLAMA_CPP_NOISE).min(case.greedy_ids.len());
            let got = greedy(&mut gpu, Strategy::Fused, &case.prompt_ids, n_noise).await;
            let n = n_noise.min(got.len());
            assert_eq!(
                got[..n],
                case.greedy_ids[..n],
                "{:?}: ids vs llama.cpp before its first margin < {LLAMA_CPP_NOISE}",
                case.prompt
            );
        }
    });
}

/// Constrained greedy on the real model (a JSON Schema, a regex, a GBNF grammar, any JSON
/// object; two chat prompts) equals the CPU reference model's masked argmax on every strategy,
/// up to the first allowed top-2 margin below 0.01. GPU machine only (`FUSELM_EXACT_ALL=1`,
/// `bench/gpu exact-reference`): on lavapipe the mask itself is held bit for bit on this
/// vocabulary (tests/constraint_mask.rs) and fused's masked greedy to the CPU reference on the
/// synthetic model (tests/constraint.rs).
#[test]
fn constrained_greedy_meets_the_cpu_reference() {
    if !exact_all() {
        println!("skipped: FUSELM_EXACT_ALL=1 runs it (the GPU machine)");
        return;
    }
    let bytes = std::fs::read(common::default_model()).unwrap();
    common::constraints::real_model_meets_the_cpu_reference(&bytes, 384);
}
