//! Text <-> token ids from a GGUF vocabulary, reproducing llama.cpp's ids exactly.
//!
//! Pure Rust, no I/O, no panics on any input. Build a [`VocabSpec`] from the GGUF's
//! `tokenizer.*` metadata, then [`Tokenizer::from_spec`]:
//!
//! * `gpt2` models: byte-level BPE with merge ranks, after the pre-tokenizer that
//!   `tokenizer.ggml.pre` selects (see `pretokenize.rs` for the names understood).
//! * `llama` models: SentencePiece-style score-based merging with `<0xNN>` byte fallback.
//!
//! [`Tokenizer::encode`] first splits out special tokens (`special.rs`), then runs the
//! model on each text fragment; [`Tokenizer::decode`] and [`StreamDecoder`] go back.
//! [`Tokenizer`] itself is in `codec.rs`; this file only declares and re-exports.

mod bpe;
mod byte_level;
mod codec;
mod error;
mod pretokenize;
mod special;
mod spm;
mod stream_decode;
mod unicode_class;
mod vocab;

pub use byte_level::byte_level_alphabet;
pub use codec::{Tokenizer, TokenizerSummary};
pub use error::TokenizerError;
pub use stream_decode::StreamDecoder;
pub use vocab::{TokenKind, VocabSpec};
