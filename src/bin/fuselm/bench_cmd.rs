//! `fuselm bench [--model PATH] [--runs N] [--toy] [--profile] [--out FILE]
//! [--tune NAME=VALUE ...]`: every strategy in this process on this device, side by side
//! (`fuselm::model::bench`, the same report as TypeScript's `bench()`), with the adapter report,
//! date and commit.

use crate::tune_args::TuneArgs;
use fuselm::model::bench::{bench_with, GenerationBenchOptions};
use fuselm::model::{Strategy, DEFAULT_CHUNK_TOKENS};
use std::error::Error;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// A GGUF model (llama family); without it only the toy grid runs.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Measured runs per configuration (after one warm-up).
    #[arg(long, default_value_t = 5)]
    runs: u32,
    /// Also run the synthetic toy grid (always on without --model).
    #[arg(long)]
    toy: bool,
    /// Only the smallest toy sizes (slow adapters).
    #[arg(long)]
    small_toy: bool,
    /// Tokens each toy workload generates (1 to 120; default 64).
    #[arg(long)]
    toy_tokens: Option<u32>,
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
    /// Also run the experimental grid megakernel (megakernel-grid).
    #[arg(long)]
    grid: bool,
    /// The grid megakernel's workgroup count (default: the occupancy discovery's; the same as
    /// --tune grid-workgroups=N).
    #[arg(long)]
    grid_workgroups: Option<u32>,
    /// Only these strategies, in this order (comma-separated: unfused,fused,megakernel,
    /// megakernel-grid). Default: unfused, fused, megakernel (+ megakernel-grid with --grid).
    #[arg(long, value_delimiter = ',')]
    strategies: Option<Vec<String>>,
    #[command(flatten)]
    tune: TuneArgs,
}

pub fn run(args: BenchArgs) -> Result<(), Box<dyn Error>> {
    pollster::block_on(run_async(args))
}

async fn run_async(args: BenchArgs) -> Result<(), Box<dyn Error>> {
    // The adapter report; with --profile also its measured bandwidth, to compare against.
    let adapter = fuselm::probe::probe(&fuselm::probe::ProbeOptions {
        bench: Some(args.profile),
        ..Default::default()
    })
    .await?;
    let bytes = match &args.model {
        Some(p) => Some(crate::model_file::read_model(p)?.0),
        None => None,
    };
    let options = GenerationBenchOptions {
        runs: Some(args.runs),
        toy: Some(args.toy || bytes.is_none()),
        small_toy: Some(args.small_toy),
        toy_tokens: args.toy_tokens,
        profile: Some(args.profile),
        long_context: Some(!args.no_long),
        chunk_tokens: Some(args.chunk_tokens),
        megakernel_grid: Some(args.grid),
        grid_workgroups: args.grid_workgroups,
        strategies: args
            .strategies
            .as_deref()
            .map(|l| l.iter().map(|s| Strategy::parse(s)).collect())
            .transpose()?,
    };
    let report = bench_with(bytes.as_deref(), &options, args.tune.context_options()?).await?;
    let out = serde_json::json!({
        "kind": "bench",
        "date": today(),
        "commit": commit(),
        "device": adapter,
        "report": report,
    });
    let text = serde_json::to_string_pretty(&out)?;
    match &args.out {
        Some(p) => std::fs::write(p, text)?,
        None => out!("{text}"),
    }
    eprintln!("{}", report.markdown);
    for note in &report.notes {
        eprintln!("note: {note}");
    }
    Ok(())
}

/// The commit the JSON records: `FUSELM_COMMIT` if set, else the one build.rs saw (release builds
/// of a git checkout), else "unknown".
pub fn commit() -> String {
    std::env::var("FUSELM_COMMIT")
        .unwrap_or_else(|_| option_env!("FUSELM_GIT_COMMIT").unwrap_or("unknown").into())
}

/// Today's date (UTC) as YYYY-MM-DD without a date crate (Howard Hinnant's civil_from_days).
pub fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0) as i64;
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
