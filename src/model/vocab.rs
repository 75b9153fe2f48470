//! The bridge from a GGUF file's `tokenizer.*` metadata to a [`Tokenizer`] and its chat template.
//! Absent optional keys stay `None`; the tokenizer applies llama.cpp's defaults itself.

use crate::chat_template::ChatTemplate;
use crate::error::Result;
use crate::gguf::{Gguf, Metadata};
use crate::tokenizer::{Tokenizer, VocabSpec};

pub fn vocab_spec(g: &Gguf) -> Result<VocabSpec> {
    let m: &Metadata = g.metadata();
    Ok(VocabSpec {
        tokens: m.get_str_array("tokenizer.ggml.tokens")?.to_vec(),
        merges: m.opt("tokenizer.ggml.merges", |m, k| {
            m.get_str_array(k).map(<[String]>::to_vec)
        })?,
        ..vocab_settings(g)?
    })
}

/// [`vocab_spec`] without its token and merge lists (left empty).
fn vocab_settings(g: &Gguf) -> Result<VocabSpec> {
    let m: &Metadata = g.metadata();
    let u32_key = |k: &str| m.opt(k, Metadata::get_u32);
    let bool_key = |k: &str| m.opt(k, Metadata::get_bool);
    Ok(VocabSpec {
        model: m.get_str("tokenizer.ggml.model")?.to_string(),
        pre: m.opt("tokenizer.ggml.pre", |m, k| {
            m.get_str(k).map(str::to_string)
        })?,
        tokens: Vec::new(),
        token_types: m.opt("tokenizer.ggml.token_type", |m, k| {
            m.get_i32_array(k).map(<[i32]>::to_vec)
        })?,
        scores: m.opt("tokenizer.ggml.scores", |m, k| {
            m.get_f32_array(k).map(<[f32]>::to_vec)
        })?,
        merges: None,
        bos: u32_key("tokenizer.ggml.bos_token_id")?,
        eos: u32_key("tokenizer.ggml.eos_token_id")?,
        eot: u32_key("tokenizer.ggml.eot_token_id")?,
        eom: u32_key("tokenizer.ggml.eom_token_id")?,
        unk: u32_key("tokenizer.ggml.unknown_token_id")?,
        pad: u32_key("tokenizer.ggml.padding_token_id")?,
        add_bos: bool_key("tokenizer.ggml.add_bos_token")?,
        add_eos: bool_key("tokenizer.ggml.add_eos_token")?,
        add_space_prefix: bool_key("tokenizer.ggml.add_space_prefix")?,
        chat_template: m.opt("tokenizer.chat_template", |m, k| {
            m.get_str(k).map(str::to_string)
        })?,
    })
}

/// The tokenizer described by the file's metadata.
pub fn tokenizer_from_gguf(g: &Gguf) -> Result<Tokenizer> {
    let m: &Metadata = g.metadata();
    let tokens = m.get_str_array("tokenizer.ggml.tokens")?;
    let merges = match m.contains("tokenizer.ggml.merges") {
        true => Some(m.get_str_array("tokenizer.ggml.merges")?),
        false => None,
    };
    Ok(Tokenizer::from_lists(vocab_settings(g)?, tokens, merges)?)
}

/// The file's chat template, with the tokenizer's BOS/EOS texts; `None` if the file has none.
pub fn chat_template_from(tok: &Tokenizer) -> Result<Option<ChatTemplate>> {
    match tok.chat_template() {
        Some(source) => Ok(Some(ChatTemplate::new(
            source,
            tok.bos_text(),
            tok.eos_text(),
        )?)),
        None => Ok(None),
    }
}
