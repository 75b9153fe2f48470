//! `fuselm synthetic-model OUT.gguf [--shape NAME] [--seed N] [--matrix-type T] [--arch A
//! --n-embd E --n-ff F --layers L --heads H --kv-heads K --head-dim D --vocab V]`: writes the tiny
//! random Llama that the Rust tests use, so the browser and site tests (and anyone without a
//! downloaded model) get a model file. Its layers mix Q4_1, Q8_0 and Q4_0 unless `--matrix-type`
//! names one format for every matrix (fewer kernels to compile: browser tests that load often
//! use that) or `Q4_K_M`, llama.cpp's mix. `--shape` starts from a released model's exact shape
//! (`SHAPES`: Phi-3-mini, Llama-3.2-1B/3B, Qwen2.5-0.5B/1.5B, Gemma 3 1B, SmolLM2-135M; Q4_K_M
//! unless `--matrix-type` says otherwise); the other flags change one dimension of it.

use fuselm::gguf::GgmlType;
use fuselm::kernels::WeightFormat;
use fuselm::model::synthetic::{shape_preset, synthetic_llama, SyntheticSpec, SHAPES};
use std::error::Error;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct SyntheticArgs {
    /// Where to write the GGUF file (parent folders are created).
    out: PathBuf,
    /// A released model's shape (phi3-mini, llama-3.2-1b, llama-3.2-3b, qwen2.5-1.5b,
    /// qwen2.5-0.5b, gemma3-1b, smollm2-135m).
    #[arg(long)]
    shape: Option<String>,
    /// Architecture: llama, qwen2, qwen3, gemma3 or phi3.
    #[arg(long)]
    arch: Option<String>,
    /// Vocabulary size (at least 258).
    #[arg(long)]
    vocab: Option<u64>,
    /// Head width, when not n_embd / heads.
    #[arg(long)]
    head_dim: Option<u64>,
    /// Seed of the random weights (default: `SyntheticSpec::default()`'s).
    #[arg(long)]
    seed: Option<u64>,
    /// One ggml type for every matrix and the embedding (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
    /// Q3_K, Q4_K, Q5_K, Q6_K, F16, BF16, F32), or Q4_K_M: llama.cpp's mix of Q4_K, Q5_K and
    /// Q6_K by role.
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
    let mix = args.matrix_type.as_deref() == Some("Q4_K_M");
    let ty = match args.matrix_type.as_deref() {
        None | Some("Q4_K_M") => None,
        Some(name) => Some(
            GgmlType::ALL
                .into_iter()
                .find(|t| t.name() == name)
                .filter(|t| WeightFormat::from_ggml(*t).is_ok())
                .ok_or_else(|| {
                    format!("--matrix-type: {name} is not a GPU weight format (or Q4_K_M)")
                })?,
        ),
    };
    let mut spec = match &args.shape {
        Some(name) => shape_preset(name, ty).ok_or_else(|| {
            let known: Vec<&str> = SHAPES.iter().map(|(n, _)| *n).collect();
            format!(
                "--shape: unknown shape {name} (known: {})",
                known.join(", ")
            )
        })?,
        None => {
            let mut spec = SyntheticSpec::default();
            if let Some(ty) = ty {
                spec.matrix_types = vec![ty];
                spec.embedding_type = ty;
            }
            if mix || ty.is_some_and(|t| t.block_len() == 256) {
                // K-quant rows are whole 256-value superblocks.
                (spec.n_embd, spec.n_ff) = (256, 512);
            }
            spec.q4_k_m = mix;
            spec
        }
    };
    if let Some(seed) = args.seed {
        spec.seed = seed;
    }
    if let Some(arch) = &args.arch {
        spec.arch = match arch.as_str() {
            "llama" => "llama",
            "qwen2" => "qwen2",
            "qwen3" => "qwen3",
            "gemma3" => "gemma3",
            "phi3" => "phi3",
            other => {
                return Err(format!(
                    "--arch: unknown architecture {other} (llama, qwen2, qwen3, gemma3, phi3)"
                )
                .into())
            }
        };
    }
    spec.n_vocab = args.vocab.unwrap_or(spec.n_vocab);
    spec.head_dim = args.head_dim.or(spec.head_dim);
    spec.n_embd = args.n_embd.unwrap_or(spec.n_embd);
    spec.n_ff = args.n_ff.unwrap_or(spec.n_ff);
    spec.n_layers = args.layers.unwrap_or(spec.n_layers);
    spec.n_head = args.heads.unwrap_or(spec.n_head);
    spec.n_head_kv = args.kv_heads.unwrap_or(spec.n_head_kv);
    // Formats with 256-value blocks fall back to 32-value ones where rows are not whole
    // superblocks (as llama.cpp does); 32 is the least a row must be a multiple of.
    let block = spec
        .matrix_types
        .iter()
        .chain([&spec.embedding_type])
        .map(|t| t.block_len().min(32) as u64)
        .max()
        .unwrap_or(1);
    if spec.n_head == 0
        || spec.n_head_kv == 0
        || spec.n_head % spec.n_head_kv != 0
        || (spec.head_dim.is_none() && spec.n_embd % spec.n_head != 0)
        || spec.n_embd % block != 0
        || spec.n_ff % block != 0
        || spec.n_vocab < fuselm::model::synthetic::SYNTHETIC_VOCAB
    {
        return Err(format!(
            "shape: n_embd {} and n_ff {} must be multiples of {block} (the format's block), n_embd of heads {} (unless --head-dim), heads of kv-heads {}, vocab {} at least 258",
            spec.n_embd, spec.n_ff, spec.n_head, spec.n_head_kv, spec.n_vocab
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
