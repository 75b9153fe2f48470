//! `fuselm inspect MODEL` and `fuselm tokenize --model MODEL TEXT` / `--decode IDS`.

use fuselm::gguf::{type_name, ModelConfig};
use fuselm::model::tokenizer_from_gguf;
use std::error::Error;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct InspectArgs {
    /// A GGUF model file.
    model: PathBuf,
    /// Print JSON (config, tensors, tokenizer) instead of tables.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct TokenizeArgs {
    /// A GGUF model file (its vocabulary is used).
    #[arg(long)]
    model: PathBuf,
    /// Print JSON instead of space-separated ids.
    #[arg(long)]
    json: bool,
    /// Prepend BOS when the model's metadata asks for it (llama.cpp's add_special).
    #[arg(long)]
    add_special: bool,
    /// Treat special-token text such as `<|im_start|>` as plain text.
    #[arg(long)]
    no_parse_special: bool,
    /// Decode these comma- or space-separated ids instead of encoding TEXT.
    #[arg(long, value_name = "IDS")]
    decode: Option<String>,
    /// The text to encode.
    text: Option<String>,
}

pub fn inspect(args: InspectArgs) -> Result<(), Box<dyn Error>> {
    let (bytes, gguf) = crate::model_file::read_model(&args.model)?;
    let config = ModelConfig::from_gguf(&gguf);
    let tokenizer = tokenizer_from_gguf(&gguf);
    if args.json {
        let json = serde_json::json!({
            "file": { "bytes": bytes.len(), "version": gguf.version, "alignment": gguf.alignment,
                      "dataOffset": gguf.data_offset, "metadataKeys": gguf.metadata().len() },
            "config": config.as_ref().map_err(|e| e.to_string()),
            "tensors": gguf.tensors(),
            "tokenizer": tokenizer.as_ref().map(|t| t.summary()).map_err(|e| e.to_string()),
        });
        out!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(());
    }
    out!(
        "file        {} ({} bytes, GGUF v{}, {} metadata keys, {} tensors)",
        args.model.display(),
        bytes.len(),
        gguf.version,
        gguf.metadata().len(),
        gguf.tensors().len()
    );
    match &config {
        Ok(c) => {
            out!(
                "model       {} — {} layers, n_embd {}, n_ff {}, heads {} (kv {}), head_dim {}",
                c.arch,
                c.n_layers,
                c.n_embd,
                c.n_ff,
                c.n_head,
                c.n_head_kv,
                c.head_dim
            );
            out!("            rope {:?} base {} dims {}, rms eps {:e}, context {}, vocab {}, tied output {}", c.rope_style, c.rope_freq_base, c.rope_dims, c.rms_eps, c.context_length, c.vocab_size, c.tied_output);
        }
        Err(e) => out!("model       not runnable: {e}"),
    }
    match &tokenizer {
        Ok(t) => {
            let s = t.summary();
            out!("tokenizer   {} (pre {}), {} tokens, {} merges, {} special; bos {:?} eos {:?} eog {:?} add_bos {}", s.model, s.pre.as_deref().unwrap_or("-"), s.vocab_size, s.merges, s.special_tokens, s.bos, s.eos, s.eog, s.add_bos);
            out!(
                "chat        {}",
                if t.chat_template().is_some() {
                    "template present"
                } else {
                    "no template"
                }
            );
        }
        Err(e) => out!("tokenizer   unusable: {e}"),
    }
    out!(
        "\n{:<32} {:<6} {:>22} {:>12}",
        "tensor",
        "type",
        "dims",
        "bytes"
    );
    for t in gguf.tensors() {
        let ty = type_name(t.type_id).unwrap_or("?");
        out!(
            "{:<32} {:<6} {:>22} {:>12}",
            t.name,
            ty,
            format!("{:?}", t.dims),
            t.size_bytes
        );
    }
    Ok(())
}

fn parse_ids(text: &str) -> Result<Vec<u32>, Box<dyn Error>> {
    text.split(|c: char| c == ',' || c.is_whitespace() || c == '[' || c == ']')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>()
                .map_err(|e| format!("bad id {s:?}: {e}").into())
        })
        .collect()
}

pub fn tokenize(args: TokenizeArgs) -> Result<(), Box<dyn Error>> {
    let (_, gguf) = crate::model_file::read_model(&args.model)?;
    let tok = tokenizer_from_gguf(&gguf)?;
    if let Some(ids) = args.decode {
        let ids = parse_ids(&ids)?;
        let text = tok.decode(&ids, true)?;
        if args.json {
            out!("{}", serde_json::json!({ "ids": ids, "text": text }));
        } else {
            out!("{text}");
        }
        return Ok(());
    }
    let text = args.text.ok_or("give TEXT to encode, or --decode IDS")?;
    let ids = tok.encode(&text, args.add_special, !args.no_parse_special);
    if args.json {
        let pieces: Vec<String> = ids
            .iter()
            .map(|&id| tok.token_text(id).unwrap_or("").to_string())
            .collect();
        out!(
            "{}",
            serde_json::json!({ "text": text, "ids": ids, "pieces": pieces })
        );
    } else {
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        out!("{}", ids.join(" "));
    }
    Ok(())
}
