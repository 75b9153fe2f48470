//! The vocabulary as read from GGUF metadata, and what llama.cpp derives from it at load
//! time (`llama_vocab::impl::load`): token attributes, default special ids, the
//! end-of-generation set.

use std::hash::BuildHasher;

use super::error::TokenizerError;

/// Everything the tokenizer needs from a GGUF file's `tokenizer.*` metadata. Plain data,
/// so that this module does not depend on the GGUF reader; every `Option` is a key that
/// may be absent, and absent keys get llama.cpp's defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VocabSpec {
    /// `tokenizer.ggml.model`: "gpt2" (byte-level BPE) or "llama" (SentencePiece).
    pub model: String,
    /// `tokenizer.ggml.pre`, e.g. "smollm", "llama-bpe", "qwen2", "gpt-2".
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.token_type`: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte.
    pub token_types: Option<Vec<i32>>,
    /// `tokenizer.ggml.scores` (SentencePiece merge priorities).
    pub scores: Option<Vec<f32>>,
    /// `tokenizer.ggml.merges`, "left right" in rank order (gpt2 only).
    pub merges: Option<Vec<String>>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.eot_token_id`.
    pub eot: Option<u32>,
    /// `tokenizer.ggml.eom_token_id`.
    pub eom: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unk: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`.
    pub pad: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`.
    pub add_eos: Option<bool>,
    /// `tokenizer.ggml.add_space_prefix` (llama model; default true there, false for gpt2).
    pub add_space_prefix: Option<bool>,
    /// `tokenizer.chat_template`.
    pub chat_template: Option<String>,
}

/// Token attributes as llama.cpp's `llama_token_attr` (a subset of its bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// Ordinary text (token_type 1).
    Normal,
    /// The unknown token (token_type 2).
    Unknown,
    /// A control token such as BOS or `<|im_start|>` (token_type 3).
    Control,
    /// A user-defined token matched whole in text (token_type 4).
    UserDefined,
    /// An unused slot (token_type 5).
    Unused,
    /// A raw byte `<0xNN>` (token_type 6).
    Byte,
    /// Any other token_type value.
    Undefined,
}

impl TokenKind {
    fn from_type(t: i32) -> TokenKind {
        match t {
            1 => TokenKind::Normal,
            2 => TokenKind::Unknown,
            3 => TokenKind::Control,
            4 => TokenKind::UserDefined,
            5 => TokenKind::Unused,
            6 => TokenKind::Byte,
            _ => TokenKind::Undefined,
        }
    }
    /// Control and unknown tokens render only when asked to (llama.cpp's `attr_special`).
    pub(crate) fn is_special(self) -> bool {
        matches!(self, TokenKind::Control | TokenKind::Unknown)
    }
}

/// Token texts that llama.cpp treats as end of generation whatever the metadata says.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];
/// Texts that make a token the EOT id when the metadata has none, in llama.cpp's list order.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
/// FIM pad/repo/file-separator texts: llama.cpp also stops on these.
const FIM_EOG_TEXTS: &[&str] = &[
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "<PAD>",
    "[PAD]",
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
    "<|file_sep|>",
];

/// Strings `0..len` in one buffer: string `i` is `text[ends[i - 1]..ends[i]]`. One allocation
/// for a whole vocabulary instead of one per token (a 10M-token vocabulary took 3.3 GB, ten
/// times its file, as a `Vec<String>` copied three times).
#[derive(Clone, Debug, Default)]
pub(crate) struct Strings {
    text: String,
    ends: Vec<u32>,
}

impl Strings {
    /// `None` when the strings total 4 GiB or more.
    fn new<'a>(strings: impl ExactSizeIterator<Item = &'a str> + Clone) -> Option<Strings> {
        let total = strings
            .clone()
            .map(str::len)
            .try_fold(0u32, |sum, len| sum.checked_add(u32::try_from(len).ok()?))?;
        let mut text = String::with_capacity(total as usize);
        let mut ends = Vec::with_capacity(strings.len());
        for s in strings {
            text.push_str(s);
            ends.push(text.len() as u32);
        }
        Some(Strings { text, ends })
    }

    pub(crate) fn get(&self, i: u32) -> Option<&str> {
        let i = i as usize;
        let end = *self.ends.get(i)? as usize;
        let start = match i {
            0 => 0,
            _ => self.ends[i - 1] as usize,
        };
        self.text.get(start..end)
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }
}

/// Token ids by text: a hash table of ids over [`Strings`] (4 bytes and a control byte per
/// token, no second copy of the texts).
#[derive(Clone, Debug, Default)]
struct TextIndex {
    table: hashbrown::HashTable<u32>,
    hasher: hashbrown::DefaultHashBuilder,
}

impl TextIndex {
    /// Every non-empty text of `texts`; a repeated text keeps its first id.
    fn new(texts: &Strings) -> TextIndex {
        let mut index = TextIndex {
            table: hashbrown::HashTable::with_capacity(texts.len()),
            hasher: Default::default(),
        };
        for id in 0..texts.len() as u32 {
            let text = texts.get(id).unwrap_or_default();
            // An empty text could never match and would stall special-token matching.
            // Duplicates keep the first id (llama.cpp refuses such files; we stay usable).
            if text.is_empty() || index.find(texts, text).is_some() {
                continue;
            }
            let hasher = &index.hasher;
            index.table.insert_unique(hasher.hash_one(text), id, |&j| {
                hasher.hash_one(texts.get(j).unwrap_or_default())
            });
        }
        index
    }

    fn find(&self, texts: &Strings, text: &str) -> Option<u32> {
        self.table
            .find(self.hasher.hash_one(text), |&j| texts.get(j) == Some(text))
            .copied()
    }
}

/// The loaded vocabulary shared by both models.
#[derive(Clone, Debug)]
pub(crate) struct Vocab {
    pub texts: Strings,
    pub kinds: Vec<TokenKind>,
    pub scores: Vec<f32>,
    to_id: TextIndex,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub unk: Option<u32>,
    pub pad: Option<u32>,
    /// Sorted end-of-generation ids.
    pub eog: Vec<u32>,
}

impl Vocab {
    /// `default_bos`/`default_eos`/`default_unk` are llama.cpp's per-model defaults,
    /// used when the metadata has no (in range) id.
    pub(crate) fn new(
        spec: &VocabSpec,
        tokens: &[String],
        default_bos: Option<u32>,
        default_eos: Option<u32>,
        default_unk: Option<u32>,
    ) -> Result<Vocab, TokenizerError> {
        let n = tokens.len();
        if n == 0 {
            return Err(TokenizerError::EmptyVocab);
        }
        if u32::try_from(n).is_err() {
            return Err(TokenizerError::VocabTooLarge(n));
        }
        let check_len = |name: &'static str, got: usize| {
            if got < n {
                Err(TokenizerError::LengthMismatch {
                    name,
                    got,
                    expected: n,
                })
            } else {
                Ok(())
            }
        };
        let mut kinds = vec![TokenKind::Normal; n];
        if let Some(types) = &spec.token_types {
            check_len("tokenizer.ggml.token_type", types.len())?;
            for (k, t) in kinds.iter_mut().zip(types) {
                *k = TokenKind::from_type(*t);
            }
        }
        let scores = match &spec.scores {
            Some(s) => {
                check_len("tokenizer.ggml.scores", s.len())?;
                s[..n].to_vec()
            }
            None => vec![0.0; n],
        };
        let texts = Strings::new(tokens.iter().map(String::as_str))
            .ok_or(TokenizerError::VocabTooLarge(n))?;
        let to_id = TextIndex::new(&texts);
        let in_range = |id: Option<u32>| id.filter(|&i| (i as usize) < n);
        let pick = |meta: Option<u32>, default: Option<u32>| in_range(meta).or(in_range(default));
        let find = |list: &[&str]| list.iter().find_map(|t| to_id.find(&texts, t));
        let eot = in_range(spec.eot).or_else(|| find(EOT_TEXTS));
        let eom = in_range(spec.eom).or_else(|| find(&["<|eom_id|>"]));
        let mut vocab = Vocab {
            bos: pick(spec.bos, default_bos),
            eos: pick(spec.eos, default_eos),
            eot,
            unk: pick(spec.unk, default_unk),
            pad: in_range(spec.pad),
            texts,
            kinds,
            scores,
            to_id,
            eog: Vec::new(),
        };
        vocab.build_eog(eom);
        Ok(vocab)
    }

    /// llama.cpp's `special_eog_ids`: EOS, EOT, EOM, FIM pad/repo/sep and known texts.
    /// Tokens found by their text are forced to control type, as llama.cpp does.
    fn build_eog(&mut self, eom: Option<u32>) {
        let mut eog: Vec<u32> = [self.eos, self.eot, eom].into_iter().flatten().collect();
        for text in EOG_TEXTS.iter().chain(FIM_EOG_TEXTS) {
            if let Some(id) = self.id(text) {
                eog.push(id);
                if let Some(kind) = self.kinds.get_mut(id as usize) {
                    if !kind.is_special() {
                        *kind = TokenKind::Control;
                    }
                }
            }
        }
        eog.sort_unstable();
        eog.dedup();
        self.eog = eog;
    }

    pub(crate) fn len(&self) -> usize {
        self.texts.len()
    }

    pub(crate) fn kind(&self, id: u32) -> Option<TokenKind> {
        self.kinds.get(id as usize).copied()
    }

    pub(crate) fn id(&self, text: &str) -> Option<u32> {
        self.to_id.find(&self.texts, text)
    }

    /// Token `id`'s text ("" past the end).
    pub(crate) fn text(&self, id: u32) -> &str {
        self.texts.get(id).unwrap_or_default()
    }
}
