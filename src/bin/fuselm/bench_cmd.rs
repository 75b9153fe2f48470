//! `fuselm bench [--model PATH] [--runs N] [--toy] [--profile] [--out FILE]`: every strategy in
//! this process on this device, side by side. Speed figures live here (and in bench/results),
//! never in tests.
//!
//! Workloads: the model with prompts of 16 and 128 tokens and 128 new tokens, and decode after
//! ~1,000 tokens of context; `--toy`: synthetic Llama models, d_model ∈ {32, 64, 128, 256},
//! 1 and 4 layers, 64 tokens. Each configuration: one warm-up, then `--runs` measured runs;
//! medians with min/max. Greedy, no stop ids (every run makes all its tokens).

use fuselm::gguf::GgmlType;
use fuselm::gpu::GpuContext;
use fuselm::model::synthetic::{synthetic_llama, SyntheticSpec};
use fuselm::model::{GenerationRequest, GpuModel, LoadOptions, Strategy, DEFAULT_CHUNK_TOKENS};
use fuselm::sampling::SamplingOptions;
use serde_json::{json, Value};
use std::error::Error;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// A GGUF model (llama family); without it only --toy runs.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Measured runs per configuration (after one warm-up).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Also run the synthetic toy grid.
    #[arg(long)]
    toy: bool,
    /// Profile one fused decode step per kernel role (timestamp queries).
    #[arg(long)]
    profile: bool,
    /// Fused: decode steps per compute pass.
    #[arg(long, default_value_t = DEFAULT_CHUNK_TOKENS)]
    chunk_tokens: u32,
    /// Write the JSON here (else stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Skip the ~1,000-token-context workload (slow on CPU adapters).
    #[arg(long)]
    no_long: bool,
}

pub fn run(args: BenchArgs) -> Result<(), Box<dyn Error>> {
    pollster::block_on(run_async(args))
}

/// min / median / max of `v`.
fn spread(mut v: Vec<f64>) -> Value {
    v.sort_by(f64::total_cmp);
    json!({ "median": v[v.len() / 2], "min": v[0], "max": v[v.len() - 1], "samples": v.len() })
}

/// Prompt ids of exactly `len` tokens: `base` repeated.
fn prompt_of(base: &[u32], len: usize) -> Vec<u32> {
    base.iter().copied().cycle().take(len).collect()
}

struct Workload {
    name: String,
    prompt: Vec<u32>,
    new_tokens: u32,
}

async fn measure(
    model: &mut GpuModel,
    w: &Workload,
    strategy: Strategy,
    runs: usize,
    chunk: u32,
) -> Result<Value, Box<dyn Error>> {
    let request = GenerationRequest {
        prompt: &w.prompt,
        max_tokens: w.new_tokens,
        strategy,
        sampler: SamplingOptions::default().resolve(&[])?,
        chunk_tokens: chunk,
    };
    model.generate(&request, &mut |_| true).await?; // warm-up
    let (mut decode, mut prefill, mut ttft) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..runs.max(1) {
        let g = model.generate(&request, &mut |_| true).await?;
        let steps = g.tokens.len().saturating_sub(1) as f64;
        decode.push(steps / g.decode_seconds);
        prefill.push(w.prompt.len() as f64 / g.prefill_seconds);
        ttft.push(g.prefill_seconds * 1e3);
        last = Some(g);
    }
    let g = last.ok_or("no run")?;
    let steps = g.decode_steps.max(1) as f64;
    let per_step = model.dispatches_per_step(strategy, false)?;
    let decode_submits = (g.submits as f64 - 1.0).max(0.0) / steps;
    Ok(json!({
        "workload": w.name,
        "strategy": strategy.name(),
        "promptTokens": w.prompt.len(),
        "newTokens": g.tokens.len(),
        "decodeTokensPerSecond": spread(decode),
        "prefillTokensPerSecond": spread(prefill),
        "timeToFirstTokenMs": spread(ttft),
        "dispatchesPerToken": per_step,
        "submitsPerToken": decode_submits,
        "weightBytesPerToken": model.decode_weight_bytes(),
        "generatedIds": g.tokens,
    }))
}

async fn bench_model(
    model: &mut GpuModel,
    workloads: &[Workload],
    args: &BenchArgs,
    rows: &mut Vec<Value>,
) -> Result<(), Box<dyn Error>> {
    for w in workloads {
        let mut unfused = None;
        let mut results = Vec::new();
        for strategy in [Strategy::Unfused, Strategy::Fused] {
            if strategy == Strategy::Fused && model.fused_available().is_err() {
                continue;
            }
            let r = measure(model, w, strategy, args.runs, args.chunk_tokens).await?;
            if strategy == Strategy::Unfused {
                unfused = Some(r["decodeTokensPerSecond"]["median"].as_f64().unwrap_or(0.0));
            }
            results.push(r);
        }
        let ids: Vec<&Value> = results.iter().map(|r| &r["generatedIds"]).collect();
        let same = ids.windows(2).all(|p| p[0] == p[1]);
        for mut r in results {
            let tps = r["decodeTokensPerSecond"]["median"].as_f64().unwrap_or(0.0);
            r["speedupVsUnfused"] = json!(unfused.map(|u| tps / u));
            r["idsEqualAcrossStrategies"] = json!(same);
            eprintln!(
                "{:<28} {:<8} decode {:>9.1} tok/s  prefill {:>9.1} tok/s  ttft {:>7.2} ms  {:>5} disp/tok  x{:.1}",
                r["workload"].as_str().unwrap_or(""),
                r["strategy"].as_str().unwrap_or(""),
                tps,
                r["prefillTokensPerSecond"]["median"].as_f64().unwrap_or(0.0),
                r["timeToFirstTokenMs"]["median"].as_f64().unwrap_or(0.0),
                r["dispatchesPerToken"],
                r["speedupVsUnfused"].as_f64().unwrap_or(0.0),
            );
            rows.push(r);
        }
    }
    Ok(())
}

fn markdown(rows: &[Value]) -> String {
    let mut s = String::from(
        "| workload | strategy | decode tok/s (min–max) | prefill tok/s | TTFT ms | dispatches/token | submits/token | × unfused |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let d = &r["decodeTokensPerSecond"];
        s += &format!(
            "| {} | {} | {:.0} ({:.0}–{:.0}) | {:.0} | {:.2} | {} | {:.3} | {:.1} |\n",
            r["workload"].as_str().unwrap_or(""),
            r["strategy"].as_str().unwrap_or(""),
            d["median"].as_f64().unwrap_or(0.0),
            d["min"].as_f64().unwrap_or(0.0),
            d["max"].as_f64().unwrap_or(0.0),
            r["prefillTokensPerSecond"]["median"]
                .as_f64()
                .unwrap_or(0.0),
            r["timeToFirstTokenMs"]["median"].as_f64().unwrap_or(0.0),
            r["dispatchesPerToken"],
            r["submitsPerToken"].as_f64().unwrap_or(0.0),
            r["speedupVsUnfused"].as_f64().unwrap_or(0.0),
        );
    }
    s
}

async fn run_async(args: BenchArgs) -> Result<(), Box<dyn Error>> {
    // The adapter report; with --profile also its measured bandwidth, to compare against.
    let adapter = fuselm::probe::probe(&fuselm::probe::ProbeOptions {
        bench: Some(args.profile),
        ..Default::default()
    })
    .await?;
    let mut rows = Vec::new();
    let mut profile = Value::Null;
    if let Some(path) = &args.model {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let load = LoadOptions {
            n_ctx: Some(1152),
            max_batch: Some(128),
            kv_f16: Some(false),
        };
        let mut model = GpuModel::load(GpuContext::new().await?, &bytes, &load).await?;
        drop(bytes);
        // Ordinary English-text ids (SmolLM2's tokenizer), repeated to length.
        let base: Vec<u32> = (0..64u32).map(|i| 300 + (i * 7919) % 20000).collect();
        let mut workloads = vec![
            Workload {
                name: "prompt 16, 128 new".into(),
                prompt: prompt_of(&base, 16),
                new_tokens: 128,
            },
            Workload {
                name: "prompt 128, 128 new".into(),
                prompt: prompt_of(&base, 128),
                new_tokens: 128,
            },
        ];
        if !args.no_long {
            workloads.push(Workload {
                name: "context 1024 (prompt 960, 64 new)".into(),
                prompt: prompt_of(&base, 960),
                new_tokens: 64,
            });
        }
        bench_model(&mut model, &workloads, &args, &mut rows).await?;
        if args.profile {
            let p16 = model.profile_fused(&prompt_of(&base, 16), 5).await?;
            let p1k = if args.no_long {
                None
            } else {
                Some(model.profile_fused(&prompt_of(&base, 1000), 5).await?)
            };
            profile = json!({ "context20": p16, "context1004": p1k });
        }
    }
    if args.toy {
        for d in [32u64, 64, 128, 256] {
            for layers in [1u32, 4] {
                let spec = SyntheticSpec {
                    n_layers: layers,
                    n_embd: d,
                    n_ff: 4 * d,
                    n_head: (d / 32).max(2),
                    n_head_kv: (d / 32).max(2),
                    matrix_types: vec![GgmlType::Q8_0],
                    embedding_type: GgmlType::Q8_0,
                    tied: true,
                    seed: d + u64::from(layers),
                    ..SyntheticSpec::default()
                };
                let file = synthetic_llama(&spec);
                let load = LoadOptions {
                    n_ctx: Some(128),
                    max_batch: Some(16),
                    kv_f16: Some(false),
                };
                let mut model = GpuModel::load(GpuContext::new().await?, &file, &load).await?;
                let w = Workload {
                    name: format!("toy d{d} L{layers}, 64 tokens"),
                    prompt: (1..9).collect(),
                    new_tokens: 64,
                };
                bench_model(&mut model, &[w], &args, &mut rows).await?;
            }
        }
    }
    let commit = option_env!("FUSELM_COMMIT").unwrap_or("unknown");
    let out = json!({
        "kind": "bench",
        "date": chrono_free_date(),
        "commit": std::env::var("FUSELM_COMMIT").unwrap_or_else(|_| commit.to_string()),
        "device": adapter,
        "runs": args.runs,
        "chunkTokens": args.chunk_tokens,
        "results": rows,
        "profile": profile,
        "markdown": markdown(&rows),
    });
    let text = serde_json::to_string_pretty(&out)?;
    match &args.out {
        Some(p) => std::fs::write(p, text)?,
        None => out!("{text}"),
    }
    eprintln!("{}", markdown(&rows));
    Ok(())
}

/// Today's date (UTC) as YYYY-MM-DD without a date crate.
fn chrono_free_date() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0) as i64;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}
