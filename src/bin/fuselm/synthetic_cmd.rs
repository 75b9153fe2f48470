//! `fuselm synthetic-model OUT.gguf [--seed N] [--matrix-type T] [--n-embd E --n-ff F --layers L
//! --heads H --kv-heads K]`: writes the tiny random Llama that the Rust tests use, so the browser
//! and site tests (and anyone without a downloaded model) get a model file. Its layers mix Q4_1,
//! Q8_0 and Q4_0 unless `--matrix-type` names one format for every matrix (fewer kernels to
//! compile: browser tests that load often use that). The shape flags make larger ones, e.g. to
//! measure a weight format's kernels at a real model's dimensions on a GPU.

use fuselm::gguf::GgmlType;
use fuselm::kernels::WeightFormat;
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
    /// One ggml type for every matrix and the embedding (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
    /// Q3_K, Q4_K, Q5_K, Q6_K, F16, BF16, F32).
    #[arg(long)]
    matrix_type: Option<String>,
    /// Model width (K-quants: a multiple of 256).
    #[arg(long)]
    n_embd: Option<u64>,
    /// FFN width (K-quants: a multiple of 256).
    #[arg(long)]
    n_ff: Option<u64>,
    #[arg(long)]
    layers: Option<u32>,
    /// Query heads (head_dim = n_embd / heads).
    #[arg(long)]
    heads: Option<u64>,
    #[arg(long)]
    kv_heads: Option<u64>,
}

pub fn run(args: SyntheticArgs) -> Result<(), Box<dyn Error>> {
    let mut spec = SyntheticSpec::default();
    if let Some(seed) = args.seed {
        spec.seed = seed;
    }
    if let Some(name) = &args.matrix_type {
        let ty = GgmlType::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .filter(|t| WeightFormat::from_ggml(*t).is_ok())
            .ok_or_else(|| format!("--matrix-type: {name} is not a GPU weight format"))?;
        spec.matrix_types = vec![ty];
        spec.embedding_type = ty;
        if ty.block_len() == 256 {
            // K-quant rows are whole 256-value superblocks.
            (spec.n_embd, spec.n_ff) = (256, 512);
        }
    }
    spec.n_embd = args.n_embd.unwrap_or(spec.n_embd);
    spec.n_ff = args.n_ff.unwrap_or(spec.n_ff);
    spec.n_layers = args.layers.unwrap_or(spec.n_layers);
    spec.n_head = args.heads.unwrap_or(spec.n_head);
    spec.n_head_kv = args.kv_heads.unwrap_or(spec.n_head_kv);
    let block = spec
        .matrix_types
        .iter()
        .chain([&spec.embedding_type])
        .map(|t| t.block_len() as u64)
        .max()
        .unwrap_or(1);
    if spec.n_head == 0
        || spec.n_head_kv == 0
        || spec.n_head % spec.n_head_kv != 0
        || spec.n_embd % spec.n_head != 0
        || spec.n_embd % block != 0
        || spec.n_ff % block != 0
    {
        return Err(format!(
            "shape: n_embd {} and n_ff {} must be multiples of {block} (the format's block), n_embd of heads {}, heads of kv-heads {}",
            spec.n_embd, spec.n_ff, spec.n_head, spec.n_head_kv
        )
        .into());
    }
    let bytes = synthetic_llama(&spec);
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&args.out, &bytes).map_err(|e| format!("{}: {e}", args.out.display()))?;
    eprintln!("wrote {} ({} bytes)", args.out.display(), bytes.len());
    Ok(())
}
