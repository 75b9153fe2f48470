//! The native `fuselm` command line: probe the adapter (later: inspect, tokenize, generate).

#[cfg(not(target_arch = "wasm32"))]
mod probe_cmd;

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
    }

    let cli = Cli::parse();
    let result = match cli.command {
        Command::Probe(args) => probe_cmd::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fuselm: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

// The package is also built for wasm32 (wasm-pack); the CLI is native only.
#[cfg(target_arch = "wasm32")]
fn main() {}
