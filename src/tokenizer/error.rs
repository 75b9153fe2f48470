//! Typed errors of the tokenizer. Nothing in this module panics on any input: every
//! malformed vocabulary or id surfaces here instead.

use thiserror::Error;

/// Why a vocabulary could not be loaded or ids could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TokenizerError {
    /// `tokenizer.ggml.model` names a model this crate does not implement.
    #[error("unsupported tokenizer model '{0}' (supported: gpt2, llama)")]
    UnsupportedModel(String),
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    #[error("unsupported pre-tokenizer '{0}'")]
    UnsupportedPreTokenizer(String),
    /// The vocabulary has no tokens.
    #[error("the vocabulary is empty")]
    EmptyVocab,
    /// The vocabulary has more tokens than a u32 id can address.
    #[error("the vocabulary has {0} tokens, more than u32 ids can address")]
    VocabTooLarge(usize),
    /// A per-token array (`token_type`, `scores`) is shorter than the token list.
    #[error("{name} has {got} entries but the vocabulary has {expected} tokens")]
    LengthMismatch {
        name: &'static str,
        got: usize,
        expected: usize,
    },
    /// A gpt2 (byte-level BPE) vocabulary came without `tokenizer.ggml.merges`.
    #[error("the gpt2 tokenizer needs tokenizer.ggml.merges")]
    MissingMerges,
    /// `add_bos`/`add_eos` is requested but the matching token id is missing or out of range.
    #[error("{0} is true but the token id is missing or out of range")]
    MissingSpecialToken(&'static str),
    /// The special tokens' matcher could not be built (more pattern bytes than it can
    /// address).
    #[error("the special tokens cannot be matched: {0}")]
    SpecialTokens(String),
    /// The tokens would decode to far more bytes than their texts: a byte-level token
    /// decodes each character outside the byte alphabet as `[UNK_BYTE_0x..<the whole
    /// text>]` (as llama.cpp does), which for a long token is its length squared.
    #[error(
        "the vocabulary's tokens decode to more than {limit} bytes beyond their texts \
         (characters outside the byte-level alphabet)"
    )]
    PiecesTooLarge { limit: u64 },
    /// An id passed to decode is not in the vocabulary.
    #[error("token id {id} is out of range (vocabulary size {vocab_size})")]
    UnknownTokenId { id: u32, vocab_size: usize },
    /// The decoded bytes are not valid UTF-8 (e.g. a multi-byte character cut by the id list).
    #[error("decoded bytes are not valid UTF-8 at byte {valid_up_to}")]
    InvalidUtf8 { valid_up_to: usize },
}
