//! `fuselm synthetic-model OUT.gguf [--seed N]`: writes the tiny random Llama that the Rust tests
//! use, so the browser and site tests (and anyone without a downloaded model) get a model file.

use fuselm::model::synthetic::{synthetic_llama, SyntheticSpec};
use std::error::Error;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct SyntheticArgs {
    /// Where to write the GGUF file (parent folders are created).
    out: PathBuf,
    /// Seed of the random weights (default: `SyntheticSpec::default()`'s).
    #[arg(long)]
    seed: Option<u64>,
}

pub fn run(args: SyntheticArgs) -> Result<(), Box<dyn Error>> {
    let mut spec = SyntheticSpec::default();
    if let Some(seed) = args.seed {
        spec.seed = seed;
    }
    let bytes = synthetic_llama(&spec);
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&args.out, &bytes).map_err(|e| format!("{}: {e}", args.out.display()))?;
    eprintln!("wrote {} ({} bytes)", args.out.display(), bytes.len());
    Ok(())
}
