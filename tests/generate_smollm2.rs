//! The real SmolLM2-135M-Instruct Q4_1 on the GPU (lavapipe here), checked two ways.
//!
//! 1. Exactness: greedy generation on the GPU equals the CPU reference forward pass (plain f32 on
//!    the dequantized weights) for 32 tokens of every fixture prompt (up to a CPU near-tie), and
//!    the GPU's logits along the way are within 1e-3 (relative) of the CPU's.
//! 2. Agreement with llama.cpp (`tests/fixtures/llama.cpp/smollm2/greedy.jsonl`). llama.cpp
//!    rounds (8-bit activations inside its quantized dot products, f16 KV cache), so its logits
//!    differ from exact arithmetic. Measured on these fixtures against both our CPU reference and
//!    an independent float64 numpy evaluation of the same weights (gguf-py dequantizer): mean
//!    |Δlogit| 0.15, max 0.57 over the top-5 logits of the first four steps. A llama.cpp top-2
//!    margin below `LLAMA_CPP_NOISE` can therefore flip under exact arithmetic, and sequences are
//!    compared only up to the first such position. The issue's stricter 0.1 rule is computed and
//!    printed too. For scale: llama.cpp 0.3.36 itself, rebuilt on our x86-64 test machine
//!    (`scripts/llama-cpp-crosscheck.py`, bench/results/llama-cpp-crosscheck-2026-11-22.json),
//!    differs from these fixtures by mean 0.106 / max 0.586 on the same logits, agrees at
//!    304/306 teacher-forced positions and meets the 0.1 greedy rule on only 3 of 5 prompts.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use fuselm::gguf::Gguf;
use fuselm::gpu::GpuContext;
use fuselm::model::{CpuReferenceModel, GpuModel, LoadOptions};
use serde_json::Value;

/// Largest |llama.cpp − exact| seen on the first-step top-5 logits, rounded down (see above).
const LLAMA_CPP_NOISE: f64 = 0.5;
const ISSUE_NEAR_TIE: f64 = 0.1;
const TOP5_TOLERANCE: f32 = 0.6;
const GREEDY_TOKENS: usize = 32;

struct Case {
    prompt: String,
    prompt_ids: Vec<u32>,
    greedy_ids: Vec<u32>,
    margins: Vec<f64>,
    top5: Vec<Vec<(u32, f32)>>,
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn cases() -> Vec<Case> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/llama.cpp/smollm2/greedy.jsonl"
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Case {
                prompt: v["prompt"].as_str().unwrap().to_string(),
                prompt_ids: ids(&v["prompt_ids"]),
                greedy_ids: ids(&v["greedy_ids"]),
                margins: v["top2_margin"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_f64().unwrap())
                    .collect(),
                top5: v["top5_first_steps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|step| {
                        step.as_array()
                            .unwrap()
                            .iter()
                            .map(|p| (p[0].as_u64().unwrap() as u32, p[1].as_f64().unwrap() as f32))
                            .collect()
                    })
                    .collect(),
            }
        })
        .collect()
}

fn top2_gap(row: &[f32]) -> f32 {
    let mut v = row.to_vec();
    v.sort_by(|a, b| b.total_cmp(a));
    v[0] - v[1]
}

fn first_below(margins: &[f64], threshold: f64) -> usize {
    margins
        .iter()
        .position(|&m| m < threshold)
        .unwrap_or(margins.len())
}

#[test]
fn smollm2_on_gpu_matches_cpu_reference_and_llama_cpp() {
    pollster::block_on(async {
        let bytes = std::fs::read(common::default_model()).unwrap();
        let gguf = Gguf::parse(&bytes).unwrap();
        let mut cpu = CpuReferenceModel::from_gguf(&gguf, &bytes).unwrap();
        let ctx = GpuContext::new().await.unwrap();
        let options = LoadOptions {
            n_ctx: Some(256),
            max_batch: Some(128),
            kv_f16: Some(false),
        };
        let mut gpu = GpuModel::load_parsed(ctx, &gguf, &bytes, &options)
            .await
            .unwrap();
        let vocab = gpu.config().vocab_size as usize;

        let (mut strict_forced, mut strict_agree) = (0usize, 0usize);
        let (mut noise_forced, mut noise_agree) = (0usize, 0usize);
        let mut max_top5_diff = 0f32;
        let mut strict_greedy_ok = 0;
        for case in cases() {
            // 1. GPU greedy == CPU reference greedy, logits within 1e-3 relative along the way.
            let r#gen = gpu
                .generate(
                    &case.prompt_ids,
                    GREEDY_TOKENS as u32,
                    16,
                    &|_| false,
                    &mut |_| true,
                )
                .await
                .unwrap();
            cpu.reset();
            let mut logits = cpu.forward(&case.prompt_ids).unwrap();
            let mut checked = 0;
            for &gpu_id in &r#gen.tokens {
                let row = &logits[logits.len() - vocab..];
                if top2_gap(row) < 1e-3 {
                    break;
                }
                let cpu_id = fuselm::reference::argmax(row).unwrap() as u32;
                assert_eq!(
                    gpu_id, cpu_id,
                    "{:?}: GPU and CPU reference differ at {checked}",
                    case.prompt
                );
                checked += 1;
                logits = cpu.forward(&[cpu_id]).unwrap();
            }
            assert!(
                checked >= 16,
                "{:?}: only {checked} tokens compared with the CPU reference",
                case.prompt
            );
            let gpu_first = gpu.next_logits(&case.prompt_ids).await.unwrap();
            cpu.reset();
            let cpu_all = cpu.forward(&case.prompt_ids).unwrap();
            let cpu_first = &cpu_all[cpu_all.len() - vocab..];
            let scale = cpu_first.iter().fold(1f32, |m, v| m.max(v.abs()));
            let diff = gpu_first
                .iter()
                .zip(cpu_first)
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(
                diff <= 1e-3 * scale,
                "{:?}: first-step logits differ from the CPU reference by {diff}",
                case.prompt
            );

            // 2. Against llama.cpp: greedy ids up to the first margin below its noise.
            let n_noise = first_below(&case.margins, LLAMA_CPP_NOISE).min(GREEDY_TOKENS);
            assert_eq!(
                r#gen.tokens[..n_noise],
                case.greedy_ids[..n_noise],
                "{:?}: ids before position {n_noise}",
                case.prompt
            );
            let n_strict = first_below(&case.margins, ISSUE_NEAR_TIE).min(GREEDY_TOKENS);
            let first_diff = r#gen
                .tokens
                .iter()
                .zip(&case.greedy_ids)
                .position(|(a, b)| a != b);
            let strict_ok = first_diff.is_none_or(|d| d >= n_strict);
            strict_greedy_ok += usize::from(strict_ok);
            println!(
                "{:?}: equal to llama.cpp for {} tokens; 0.1-rule needs {n_strict} ({}); noise rule needs {n_noise}",
                case.prompt,
                first_diff.unwrap_or(GREEDY_TOKENS),
                if strict_ok { "met" } else { "not met" }
            );

            // Teacher forcing over llama.cpp's sequence, and the first steps' logits.
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
                    let d = (row[id as usize] - logit).abs();
                    max_top5_diff = max_top5_diff.max(d);
                    assert!(
                        d < TOP5_TOLERANCE,
                        "{:?} step {i} token {id}: {} vs llama.cpp {logit}",
                        case.prompt,
                        row[id as usize]
                    );
                }
                let ours = fuselm::reference::argmax(row).unwrap() as u32;
                if case.margins[i] >= ISSUE_NEAR_TIE {
                    strict_forced += 1;
                    strict_agree += usize::from(ours == want);
                }
                if case.margins[i] >= LLAMA_CPP_NOISE {
                    noise_forced += 1;
                    noise_agree += usize::from(ours == want);
                }
            }
        }
        println!(
            "teacher forcing: {strict_agree}/{strict_forced} ({:.2}%) at margin >= 0.1, {noise_agree}/{noise_forced} at margin >= {LLAMA_CPP_NOISE}; \
             greedy 0.1-rule met for {strict_greedy_ok}/5 prompts; max |logit - llama.cpp| on first-step top-5: {max_top5_diff:.4}",
            100.0 * strict_agree as f64 / strict_forced as f64
        );
        assert_eq!(
            noise_agree, noise_forced,
            "argmax disagrees with llama.cpp where its margin exceeds its noise"
        );
        assert!(strict_agree as f64 >= 0.98 * strict_forced as f64);
    });
}
