//! `fuselm prefill-bench --model PATH [--lengths 128,512,1024] [--max-batch N] [--runs N]
//! [--strategy S] [--profile] [--sessions] [--kv-f16] [--out FILE] [--tune NAME=VALUE ...]`: time
//! to first token and prefill tok/s per prompt length (`fuselm::model::prefill_bench`), with the
//! adapter report, date and commit; `--profile` adds the prefill body per kernel role,
//! `--sessions` saving each prompt as a session and restoring it to the first token.

use crate::bench_cmd::{commit, today};
use crate::tune_args::TuneArgs;
use fuselm::gpu::GpuContext;
use fuselm::model::prefill_bench::prefill_bench;
use fuselm::model::{LoadOptions, Strategy};
use std::error::Error;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct PrefillBenchArgs {
    /// A GGUF model file.
    #[arg(long)]
    model: PathBuf,
    /// Prompt lengths in tokens (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [128u32, 512, 1024])]
    lengths: Vec<u32>,
    /// Tokens per prefill batch (default: the longest length, so each prompt is one batch).
    #[arg(long)]
    max_batch: Option<u32>,
    /// Measured runs per length (after one warm-up).
    #[arg(long, default_value_t = 5)]
    runs: u32,
    /// The strategy that generates the first token (default: fused).
    #[arg(long, default_value = "fused")]
    strategy: String,
    /// Also time each dispatch of one prefill batch (timestamp queries).
    #[arg(long)]
    profile: bool,
    /// Also save each prompt's KV cache as a session and time restoring it to the first token
    /// (against prefilling the prompt again).
    #[arg(long)]
    sessions: bool,
    /// Keep the KV cache in f16 (default: f32).
    #[arg(long)]
    kv_f16: bool,
    /// Write the JSON here (else stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    tune: TuneArgs,
}

pub fn run(args: PrefillBenchArgs) -> Result<(), Box<dyn Error>> {
    pollster::block_on(run_async(args))
}

async fn run_async(args: PrefillBenchArgs) -> Result<(), Box<dyn Error>> {
    let longest = args.lengths.iter().copied().max().unwrap_or(1);
    let strategy = Strategy::parse(&args.strategy)?;
    let adapter = fuselm::probe::probe(&fuselm::probe::ProbeOptions::default()).await?;
    let ctx = GpuContext::with_options(args.tune.context_options()?).await?;
    // Whether the tile on cooperative matrices was asked for and the device has it
    // (matmul_coop.wgsl: then quantized and F16 weights use it; F32 and BF16 stay on the SIMT
    // tiles).
    let coop = fuselm::kernels::MatMul::coop_enabled(&ctx);
    eprintln!(
        "prefill matrix products: {}",
        if coop {
            "cooperative matrices"
        } else {
            "SIMT tiles"
        }
    );
    let load = LoadOptions {
        n_ctx: Some(longest + 8),
        max_batch: Some(args.max_batch.unwrap_or(longest)),
        kv_f16: Some(args.kv_f16),
        strategy: None,
    };
    let mut model = crate::model_file::load_streamed(&args.model, ctx, load, None).await?;
    let rows = prefill_bench(
        model.gpu(),
        &args.lengths,
        strategy,
        args.runs,
        args.profile,
        args.sessions,
    )
    .await?;
    for r in &rows {
        eprintln!(
            "prompt {:>5}: TTFT {:8.2} ms, prefill {:8.0} tok/s ({} batches)",
            r.prompt_tokens,
            r.time_to_first_token_ms.median,
            r.prefill_tokens_per_second.median,
            r.batches
        );
        if let Some(s) = &r.session {
            eprintln!(
                "    session {:.1} MB ({:.0} B/token): save {:.2} ms, restore to first token {:.2} ms",
                s.bytes as f64 / 1e6,
                s.bytes_per_token,
                s.save_ms.median,
                s.restore_to_first_token_ms.median
            );
        }
        if let Some(p) = &r.profile {
            for role in &p.roles {
                eprintln!(
                    "    {:<16} {:>3} dispatches {:9.1} µs",
                    role.role, role.dispatches_per_step, role.microseconds_per_step
                );
            }
            eprintln!(
                "    sum of roles {:.1} µs, body in one pass {:.1} µs",
                p.sum_of_roles_microseconds, p.step_microseconds
            );
        }
    }
    let out = serde_json::json!({
        "kind": "prefill-bench",
        "date": today(),
        "commit": commit(),
        "device": adapter,
        "model": args.model.file_name().map(|n| n.to_string_lossy().into_owned()),
        "maxBatch": model.gpu().max_batch(),
        "kvF16": args.kv_f16,
        "coopMatrix": coop,
        "rows": rows,
    });
    let text = serde_json::to_string_pretty(&out)?;
    match &args.out {
        Some(p) => std::fs::write(p, text)?,
        None => out!("{text}"),
    }
    Ok(())
}
