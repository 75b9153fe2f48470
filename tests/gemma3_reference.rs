//! Gemma 3 270M Q4_K_M (`scripts/fetch-model gemma3`) against its float64 exact reference,
//! `tests/fixtures/exact/gemma3/exact_greedy.jsonl` (made by `scripts/exact-reference.py` on the GPU
//! machine: `bench/gpu exact-reference`; see `tests/fixtures/exact/gemma3/README.md`).
//!
//! What runs: the model description (gemma3 switches read from the metadata), the tokenizer on
//! the reference's prompts, and the CPU reference forward pass under the exact rule of
//! `../shared/fixtures/README.md` (greedy ids equal up to the first reference margin below 0.01;
//! teacher-forced argmax equal wherever the margin is at least 0.01; first-step logits within
//! 1e-3). On the GPU, fused and unfused are each held to the same greedy rule. Native only: the
//! CPU reference dequantizes the whole model to f32 (1.1 GB); the browser runs gemma3's own
//! kernels (GeGLU, per-head norms) in tests/kernels.rs.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::exact::{greedy_cases, ids, GreedyCase};
use fuselm::error::FuselmError;
use fuselm::gguf::{FfnActivation, Gguf, ModelConfig, RopeStyle};
use fuselm::gpu::ContextOptions;
use fuselm::model::{
    estimate_memory, tokenizer_from_gguf, CpuReferenceModel, GenerateOptions, GenerationRequest,
    LoadOptions, MemoryBudget, ModelLoader, Strategy, TextModel,
};
use fuselm::reference::argmax;
use fuselm::sampling::SamplingOptions;
use serde_json::Value;

const MARGIN: f64 = 0.01;
const TOP5_TOLERANCE: f64 = 1e-3;
/// Prompts the CPU reference runs (short ones: the 262,144-row head costs ~0.2 s a token).
const CPU_PROMPTS: [usize; 2] = [0, 2];
/// The short prompts each GPU strategy generates from on CI (a prompt each: the CPU reference
/// above holds both; all ten for both strategies with FUSELM_EXACT_ALL=1).
const GPU_PROMPTS: [(Strategy, usize); 2] = [(Strategy::Fused, 0), (Strategy::Unfused, 2)];
/// On CI each GPU strategy checks the rule's first `CI_TOKENS` ids (of 25 and 21): a decode step
/// costs lavapipe seconds (the 262,144-row head), and the two tests took 375 and 397 s of CI on
/// a slow machine (2026-11-29). The whole rule on every prompt with FUSELM_EXACT_ALL=1.
const CI_TOKENS: usize = 8;

fn cases() -> Vec<GreedyCase> {
    greedy_cases(include_str!("fixtures/exact/gemma3/exact_greedy.jsonl"))
}

fn model() -> (std::path::PathBuf, Vec<u8>) {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("models/gemma-3-270m-q4_k_m.gguf");
    if !path.exists() {
        let status = std::process::Command::new(root.join("scripts/fetch-model"))
            .arg("gemma3")
            .status()
            .expect("run scripts/fetch-model gemma3");
        assert!(status.success(), "scripts/fetch-model gemma3 failed");
    }
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

#[test]
fn gemma3_config_tokenizer_and_cpu_reference_meet_the_exact_reference() {
    let (_, bytes) = model();
    let gguf = Gguf::parse(&bytes).expect("parse");
    let c = ModelConfig::from_gguf(&gguf).expect("config");
    assert_eq!(c.arch, "gemma3");
    assert_eq!(
        (c.n_layers, c.n_embd, c.n_head, c.n_head_kv, c.head_dim),
        (18, 640, 4, 1, 256)
    );
    assert_eq!(c.rope_style, RopeStyle::NeoX);
    assert!(c.qk_norm && c.post_norms && c.tied_output);
    assert_eq!(c.ffn_activation, FfnActivation::GeluTanh);
    assert_eq!(c.embedding_scale, 640f32.sqrt());
    assert_eq!(c.attention_scale, 1.0 / 16.0);
    assert_eq!(c.layer_attention(0), (Some(512), 10_000.0));
    assert_eq!(c.layer_attention(5), (None, 1_000_000.0));

    let cases = cases();
    assert_eq!(cases.len(), 10);
    let tok = tokenizer_from_gguf(&gguf).expect("tokenizer");
    for case in &cases {
        assert_eq!(
            tok.encode(&case.prompt, true, true),
            case.prompt_ids,
            "{:?}",
            case.prompt
        );
    }

    let mut cpu = CpuReferenceModel::from_gguf(&gguf, &bytes).expect("cpu model");
    let vocab = c.vocab_size as usize;
    for &i in &CPU_PROMPTS {
        let case = &cases[i];
        // Teacher forcing over prompt + reference continuation, one batched forward pass.
        cpu.reset();
        let seq: Vec<u32> = case
            .prompt_ids
            .iter()
            .chain(&case.greedy_ids)
            .copied()
            .collect();
        let logits = cpu.forward(&seq).expect("forward");
        let n_prompt = case.prompt_ids.len();
        let first = &logits[(n_prompt - 1) * vocab..n_prompt * vocab];
        let mut worst = 0f64;
        for &(id, want) in &case.top5[0] {
            worst = worst.max((f64::from(first[id as usize]) - want).abs());
        }
        assert!(
            worst <= TOP5_TOLERANCE,
            "{:?}: first-step top-5 logits off by {worst}",
            case.prompt
        );
        let mut forced = 0;
        for (j, &want) in case.greedy_ids.iter().enumerate() {
            if case.margins[j] < MARGIN {
                continue;
            }
            let row = &logits[(n_prompt - 1 + j) * vocab..(n_prompt + j) * vocab];
            assert_eq!(
                argmax(row),
                Some(want as usize),
                "{:?}: forced position {j}",
                case.prompt
            );
            forced += 1;
        }
        // Greedy through the KV cache up to the first small margin.
        let n_rule = case.first_below(MARGIN);
        cpu.reset();
        let got = cpu.greedy(&case.prompt_ids, n_rule).expect("greedy");
        assert_eq!(
            got,
            case.greedy_ids[..n_rule],
            "{:?}: greedy ids",
            case.prompt
        );
        println!(
            "{:?}: top-5 within {worst:.1e}, {forced} forced positions agree, greedy {n_rule}/{n_rule}",
            case.prompt
        );
    }
}

/// The GPU: each strategy — unfused (every architecture switch as its own dispatch) and fused
/// (4 dispatches per layer, the switches inside the fused kernels; the default) — meets the
/// exact rule: on CI's software adapter each on one of the short prompts (`GPU_PROMPTS`), all ten
/// (two of ~250 tokens) with FUSELM_EXACT_ALL=1 as on the GPU machine (`bench/gpu
/// exact-reference`).
fn gemma3_on_the_gpu(strategy: Strategy) {
    let (_, bytes) = model();
    let cases = cases();
    pollster::block_on(async {
        let root = fuselm::gpu::GpuContext::new().await.expect("gpu");
        let options = LoadOptions {
            n_ctx: Some(384),
            max_batch: Some(64),
            kv_f16: Some(false),
            strategy: None,
        };
        let sibling = || root.sibling(ContextOptions::default()).expect("context");
        let mut text = TextModel::load(sibling(), &bytes, &options)
            .await
            .expect("load");
        // Unfused runs with a chat model beside it on the same device, loaded within a budget
        // made of the two estimates (see `chat_model_beside_gemma3`).
        let mut beside = if strategy == Strategy::Unfused {
            Some(ChatModelBeside::load(sibling(), text.gpu().memory().total).await)
        } else {
            None
        };
        // No template in this (base-model) file: Gemma 3's turn format is the fallback, with one
        // BOS, giving exactly the reference's chat-shaped prompts.
        let chat = GenerateOptions {
            chat: Some(true),
            ..GenerateOptions::default()
        };
        for &i in &[3usize, 4, 7] {
            let user = cases[i].prompt["<start_of_turn>user\n".len()..]
                .split("<end_of_turn>")
                .next()
                .unwrap()
                .to_string();
            let ids = text.encode_prompt(&user, &chat).expect("chat prompt");
            assert_eq!(ids, cases[i].prompt_ids, "chat rendering of {user:?}");
        }
        let gpu = text.gpu();
        gpu.check_strategy(Strategy::Fused)
            .expect("fused kernels run gemma3");
        // Fused by default, except on a software adapter like CI's (see the planner).
        let (_, why) = gpu.default_strategy();
        assert!(!why.contains("cannot run this model"), "{why}");
        let all = std::env::var_os("FUSELM_EXACT_ALL").is_some();
        let prompts: Vec<usize> = if all {
            (0..cases.len()).collect()
        } else {
            GPU_PROMPTS
                .iter()
                .filter(|(s, _)| *s == strategy)
                .map(|&(_, i)| i)
                .collect()
        };
        assert!(!prompts.is_empty(), "{strategy:?} has no prompt");
        for i in prompts {
            let case = &cases[i];
            let n_rule = case.first_below(MARGIN);
            let n_rule = if all { n_rule } else { n_rule.min(CI_TOKENS) };
            let request = GenerationRequest {
                prompt: &case.prompt_ids,
                max_tokens: n_rule as u32,
                strategy,
                sampler: SamplingOptions::default().resolve(&[1, 106]).unwrap(),
                chunk_tokens: 16,
                reuse_prefix: false,
                constraint: None,
                logprobs: None,
            };
            let out = gpu
                .generate(&request, &mut |_| true)
                .await
                .expect("generate");
            assert_eq!(
                out.tokens,
                case.greedy_ids[..n_rule],
                "{strategy:?}: {:?}",
                case.prompt
            );
            println!(
                "{:?}: GPU {strategy:?} greedy {n_rule}/{n_rule}",
                case.prompt
            );
        }
        if let Some(smol) = &mut beside {
            smol.meets_its_reference(false).await;
            // Disposing Gemma leaves the chat model as it was: its weights and its KV cache (the
            // prompt's rows are reused rather than prefilled again, ~50 s of lavapipe).
            drop(text);
            smol.meets_its_reference(true).await;
        }
    });
}

/// The real SmolLM2-135M-Instruct loaded beside Gemma 3 270M on one device, refused one byte
/// short of its estimate and loaded with it; its greedy ids meet its own exact reference
/// (`tests/fixtures/exact/smollm2`, prompt 5, `SMOL_TOKENS` ids) while Gemma is loaded and
/// after Gemma is dropped.
struct ChatModelBeside {
    model: TextModel,
    case: GreedyCase,
}

const SMOL_TOKENS: usize = 6;

impl ChatModelBeside {
    async fn load(ctx: fuselm::gpu::GpuContext, gemma_held: u64) -> Self {
        let bytes = std::fs::read(common::default_model()).expect("SmolLM2");
        let options = LoadOptions {
            n_ctx: Some(128),
            max_batch: Some(64),
            kv_f16: Some(false),
            strategy: None,
        };
        let need = estimate_memory(&ctx, &Gguf::parse(&bytes).expect("parse"), &options)
            .expect("estimate");
        let load = |budget: u64| {
            let mut loader = ModelLoader::new(
                ctx.sibling(ContextOptions::default()).unwrap(),
                options.clone(),
            )
            .with_memory_budget(Some(MemoryBudget {
                budget,
                in_use: gemma_held,
            }));
            let pushed = loader.push(&bytes);
            async move {
                pushed?;
                loader.finish().await
            }
        };
        let short = load(gemma_held + need.total - 1).await;
        assert!(
            matches!(short, Err(FuselmError::MemoryBudget { needed, .. }) if needed == need.total),
            "one byte short of the estimate is refused"
        );
        let mut model = load(gemma_held + need.total).await.expect("load SmolLM2");
        let held = model.gpu().memory();
        assert!(held.total <= need.total, "{held:?} within {need:?}");
        println!(
            "SmolLM2 (nCtx 128) beside Gemma 3 270M (nCtx 384): {} + {} bytes held",
            held.total, gemma_held
        );
        let case =
            greedy_cases(include_str!("fixtures/exact/smollm2/exact_greedy.jsonl")).swap_remove(5);
        Self { model, case }
    }

    async fn meets_its_reference(&mut self, reuse_prefix: bool) {
        let n = self.case.first_below(MARGIN).min(SMOL_TOKENS);
        let request = GenerationRequest {
            prompt: &self.case.prompt_ids,
            max_tokens: n as u32,
            strategy: Strategy::Unfused,
            sampler: SamplingOptions::default().resolve(&[]).unwrap(),
            chunk_tokens: 16,
            reuse_prefix,
            constraint: None,
            logprobs: None,
        };
        let out = self
            .model
            .gpu()
            .generate(&request, &mut |_| true)
            .await
            .expect("generate");
        assert_eq!(
            out.tokens,
            self.case.greedy_ids[..n],
            "SmolLM2 beside Gemma"
        );
    }
}

#[test]
fn gemma3_fused_meets_the_exact_reference() {
    gemma3_on_the_gpu(Strategy::Fused);
}

#[test]
fn gemma3_unfused_meets_the_exact_reference() {
    gemma3_on_the_gpu(Strategy::Unfused);
}

/// Gemma's SPM vocabulary (262,144 tokens, byte fallback, no space prefix, user-defined
/// whitespace and HTML tokens) against llama.cpp on a varied string set
/// (`tests/fixtures/llama.cpp/gemma3/tokenize.jsonl`, `scripts/llama-cpp-tokenize.py`): ids
/// exact with BOS and special-token parsing, and decoding gives the text back.
#[test]
fn gemma3_tokenizer_matches_llama_cpp() {
    let (_, bytes) = model();
    let gguf = Gguf::parse(&bytes).expect("parse");
    let tok = tokenizer_from_gguf(&gguf).expect("tokenizer");
    let cases = include_str!("fixtures/llama.cpp/gemma3/tokenize.jsonl");
    let mut n = 0;
    for line in cases.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap();
        let text = v["text"].as_str().unwrap();
        let want = ids(&v["ids"]);
        assert_eq!(tok.encode(text, true, true), want, "ids of {text:?}");
        assert_eq!(want[0], 2, "BOS first");
        assert_eq!(
            tok.decode(&want[1..], true).unwrap(),
            text,
            "decode of {text:?}"
        );
        n += 1;
    }
    assert_eq!(n, 42);
}

/// Constrained greedy on Gemma 3 (262,144 ids; formats and prompts as SmolLM2's in
/// tests/generate_smollm2.rs) equals the CPU reference model's masked argmax on every strategy
/// that runs it, up to the first allowed top-2 margin below 0.01. GPU machine only
/// (`FUSELM_EXACT_ALL=1`, `bench/gpu exact-reference --model gemma3`).
#[test]
fn gemma3_constrained_greedy_meets_the_cpu_reference() {
    if std::env::var_os("FUSELM_EXACT_ALL").is_none() {
        println!("skipped: FUSELM_EXACT_ALL=1 runs it (the GPU machine)");
        return;
    }
    let (_, bytes) = model();
    common::constraints::real_model_meets_the_cpu_reference(&bytes, 384);
}
