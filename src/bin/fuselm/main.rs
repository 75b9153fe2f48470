//! The native `fuselm` command line: probe the adapter, inspect a model, tokenize, generate.

/// `println!` that returns an error instead of panicking when stdout is closed (`| head`).
#[cfg(not(target_arch = "wasm32"))]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

#[cfg(not(target_arch = "wasm32"))]
mod bench_cmd;
#[cfg(not(target_arch = "wasm32"))]
mod constraint_bench_cmd;
#[cfg(not(target_arch = "wasm32"))]
mod generate_cmd;
#[cfg(not(target_arch = "wasm32"))]
mod model_cmds;
#[cfg(not(target_arch = "wasm32"))]
mod model_file;
#[cfg(not(target_arch = "wasm32"))]
mod prefill_bench_cmd;
#[cfg(not(target_arch = "wasm32"))]
mod probe_cmd;
#[cfg(not(target_arch = "wasm32"))]
mod sim_bench_cmd;
#[cfg(not(target_arch = "wasm32"))]
mod synthetic_cmd;
#[cfg(not(target_arch = "wasm32"))]
mod tune_args;

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    use clap::{Parser, Subcommand};

    #[derive(Parser)]
    #[command(
        name = "fuselm",
        version,
        about = "Fused LLM generation on the GPU through wgpu"
    )]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Subcommand)]
    enum Command {
        /// Report what the GPU adapter can do (identity, features, limits, model fit).
        Probe(probe_cmd::ProbeArgs),
        /// Describe a GGUF model: hyper-parameters, tensor table, tokenizer.
        Inspect(model_cmds::InspectArgs),
        /// Tokenize TEXT with a model's vocabulary (or --decode IDS), as llama.cpp does.
        Tokenize(model_cmds::TokenizeArgs),
        /// Generate text on the GPU, streaming it to stdout (or --json).
        Generate(Box<generate_cmd::GenerateArgs>),
        /// Benchmark every strategy side by side (decode/prefill tok/s, TTFT, dispatches,
        /// speed-up vs unfused; --toy grid, --profile per kernel role) and print JSON.
        Bench(bench_cmd::BenchArgs),
        /// Compile every JSON Schema of a directory over a model's vocabulary and generate with
        /// each (greedy and seeded); print JSON with the outputs, compile times and sizes.
        ConstraintBench(constraint_bench_cmd::ConstraintBenchArgs),
        /// Time to first token and prefill tok/s per prompt length (--profile per kernel role).
        PrefillBench(prefill_bench_cmd::PrefillBenchArgs),
        /// Benchmark population rollouts (fused vs unfused simulation) and print JSON.
        SimBench(sim_bench_cmd::SimBenchArgs),
        /// Write a tiny random Llama GGUF (byte vocab, ChatML) for tests.
        #[command(hide = true)]
        SyntheticModel(synthetic_cmd::SyntheticArgs),
    }

    let cli = Cli::parse();
    let result = match cli.command {
        Command::Probe(args) => probe_cmd::run(args),
        Command::Inspect(args) => model_cmds::inspect(args),
        Command::Tokenize(args) => model_cmds::tokenize(args),
        Command::Generate(args) => generate_cmd::run(*args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::ConstraintBench(args) => constraint_bench_cmd::run(args),
        Command::PrefillBench(args) => prefill_bench_cmd::run(args),
        Command::SimBench(args) => sim_bench_cmd::run(args),
        Command::SyntheticModel(args) => synthetic_cmd::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(e.as_ref()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fuselm: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

// The package is also built for wasm32 (wasm-pack); the CLI is native only.
#[cfg(target_arch = "wasm32")]
fn main() {}
