//! The loaded vocabulary ([`Tokenizer`]): text to ids and back, as llama.cpp does it.

use super::bpe::BpeModel;
use super::byte_level;
use super::error::TokenizerError;
use super::pretokenize::PreTokenizer;
use super::special::{self, Fragment};
use super::spm;
use super::vocab::{TokenKind, Vocab, VocabSpec};

/// What [`Tokenizer::summary`] reports: enough to log or show which vocabulary is loaded.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TokenizerSummary {
    pub model: String,
    pub pre: Option<String>,
    pub vocab_size: usize,
    /// Distinct merge pairs (gpt2), 0 for llama.
    pub merges: usize,
    /// Tokens matched whole in text (control, user-defined, unknown).
    pub special_tokens: usize,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub unk: Option<u32>,
    pub pad: Option<u32>,
    /// End-of-generation ids, sorted.
    pub eog: Vec<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
}

#[derive(Clone, Debug)]
enum Model {
    Bpe { bpe: BpeModel, pre: PreTokenizer },
    Spm,
}

/// Bytes the decoded tokens may have beyond their texts (no real vocabulary comes near).
const PIECES_EXTRA: u64 = 16 << 20;

/// A loaded vocabulary. Cheap to share by reference; all methods take `&self`.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    vocab: Vocab,
    model: Model,
    /// The tokens matched whole in text.
    specials: special::SpecialTokens,
    /// Each token's bytes as llama.cpp's `token_to_piece(.., special = true)`, in one buffer:
    /// token `i` is `pieces[piece_ends[i - 1]..piece_ends[i]]`.
    pieces: Vec<u8>,
    piece_ends: Vec<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    model_name: String,
    pre_name: Option<String>,
    chat_template: Option<String>,
}

impl Tokenizer {
    /// Loads a vocabulary, applying llama.cpp's defaults for absent metadata: gpt2 has
    /// add_bos false (true for the llama3 pre-tokenizer family) and default BOS/EOS 11;
    /// llama has add_bos true, add_space_prefix true, BOS 1, EOS 2, UNK 0.
    pub fn from_spec(mut spec: VocabSpec) -> Result<Tokenizer, TokenizerError> {
        let tokens = std::mem::take(&mut spec.tokens);
        let merges = spec.merges.take();
        Self::from_lists(spec, &tokens, merges.as_deref())
    }

    /// [`Tokenizer::from_spec`] with the token and merge lists borrowed (from the GGUF
    /// metadata, so that they are not copied once more); `spec`'s own lists are ignored.
    pub fn from_lists(
        spec: VocabSpec,
        tokens: &[String],
        merges: Option<&[String]>,
    ) -> Result<Tokenizer, TokenizerError> {
        let (model, vocab, add_bos_default, space_default) = match spec.model.as_str() {
            "gpt2" => {
                let pre = PreTokenizer::from_name(spec.pre.as_deref())?;
                let default_bos = if pre.no_default_bos { None } else { Some(11) };
                let vocab = Vocab::new(&spec, tokens, default_bos, Some(11), None)?;
                let merges = merges.ok_or(TokenizerError::MissingMerges)?;
                let bpe = BpeModel::new(&vocab, merges, pre.ignore_merges);
                let add_bos = pre.add_bos_default;
                (Model::Bpe { bpe, pre }, vocab, add_bos, false)
            }
            "llama" => (
                Model::Spm,
                Vocab::new(&spec, tokens, Some(1), Some(2), Some(0))?,
                true,
                true,
            ),
            other => return Err(TokenizerError::UnsupportedModel(other.to_string())),
        };
        let add_bos = spec.add_bos.unwrap_or(add_bos_default);
        let add_eos = spec.add_eos.unwrap_or(false);
        if add_bos && vocab.bos.is_none() {
            return Err(TokenizerError::MissingSpecialToken("add_bos_token"));
        }
        if add_eos && vocab.eos.is_none() {
            return Err(TokenizerError::MissingSpecialToken("add_eos_token"));
        }
        // A piece is at most its text's bytes, except where a byte-level token has characters
        // outside the byte alphabet (`byte_level::decoded_len`): those may add PIECES_EXTRA
        // bytes in all, so the pieces fit u32 offsets as the texts do.
        let mut extra = 0u64;
        let mut pieces = Vec::new();
        let mut piece_ends = Vec::with_capacity(vocab.len());
        for id in 0..vocab.len() as u32 {
            if let (Model::Bpe { .. }, Some(TokenKind::Normal)) = (&model, vocab.kind(id)) {
                let text = vocab.text(id);
                extra += byte_level::decoded_len(text).saturating_sub(text.len() as u64);
                if extra > PIECES_EXTRA {
                    return Err(TokenizerError::PiecesTooLarge {
                        limit: PIECES_EXTRA,
                    });
                }
            }
            render_piece(&vocab, &model, id, &mut pieces);
            let end = u32::try_from(pieces.len())
                .map_err(|_| TokenizerError::VocabTooLarge(vocab.len()))?;
            piece_ends.push(end);
        }
        Ok(Tokenizer {
            specials: special::SpecialTokens::new(&vocab)?,
            pieces,
            piece_ends,
            add_bos,
            add_eos,
            add_space_prefix: spec.add_space_prefix.unwrap_or(space_default),
            model_name: spec.model,
            pre_name: spec.pre,
            chat_template: spec.chat_template,
            vocab,
            model,
        })
    }

    /// Text to ids, as llama.cpp's `llama_tokenize(text, add_special, parse_special)`.
    /// `add_special` adds BOS/EOS where the metadata asks for them; `parse_special`
    /// matches control tokens such as `<|im_start|>` in the text (user-defined tokens
    /// are always matched).
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            out.extend(self.vocab.bos);
        }
        let frags = self.specials.partition(text, parse_special);
        match &self.model {
            Model::Bpe { bpe, pre } => {
                let mut scratch = String::new();
                for frag in frags {
                    match frag {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text(range) => {
                            let fragment = &text[range];
                            for word in pre.split(fragment) {
                                bpe.encode_word(
                                    &self.vocab,
                                    &fragment[word],
                                    &mut scratch,
                                    &mut out,
                                );
                            }
                        }
                    }
                }
            }
            Model::Spm => {
                // A space is prefixed to text at the start and after each special token.
                let mut prev_special = true;
                for frag in frags {
                    match frag {
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                        Fragment::Text(range) => {
                            let mut escaped = String::with_capacity(range.len() + 3);
                            if self.add_space_prefix && prev_special {
                                escaped.push(spm::SPACE);
                            }
                            escaped.extend(text[range].chars().map(|c| {
                                if c == ' ' {
                                    spm::SPACE
                                } else {
                                    c
                                }
                            }));
                            spm::encode(&self.vocab, &escaped, &mut out);
                            prev_special = false;
                        }
                    }
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.vocab.eos);
        }
        out
    }

    /// The bytes of one token: llama.cpp's `token_to_piece`. With `render_special` false,
    /// control and unknown tokens give no bytes. A piece may be part of a character.
    pub fn token_to_piece(&self, id: u32, render_special: bool) -> Result<&[u8], TokenizerError> {
        let i = id as usize;
        let end = *self.piece_ends.get(i).ok_or(self.unknown_id(id))? as usize;
        let start = i.checked_sub(1).map_or(0, |p| self.piece_ends[p] as usize);
        let piece = &self.pieces[start..end];
        let hidden = !render_special && self.vocab.kind(id).is_some_and(TokenKind::is_special);
        Ok(if hidden { &[] } else { piece })
    }

    /// Concatenated bytes of `ids`. For llama models the space that encoding prefixed
    /// is removed from the first non-special token, as SentencePiece does.
    pub fn decode_bytes(
        &self,
        ids: &[u32],
        render_special: bool,
    ) -> Result<Vec<u8>, TokenizerError> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        let mut strip_space = matches!(self.model, Model::Spm) && self.add_space_prefix;
        for &id in ids {
            let piece = self.token_to_piece(id, render_special)?;
            if strip_space && !self.vocab.kind(id).is_some_and(TokenKind::is_special) {
                strip_space = false;
                out.extend_from_slice(piece.strip_prefix(b" ").unwrap_or(piece));
            } else {
                out.extend_from_slice(piece);
            }
        }
        Ok(out)
    }

    /// Ids to text. Errors on an id outside the vocabulary or on bytes that are not
    /// valid UTF-8 (e.g. the ids end inside a character); see [`Tokenizer::decode_lossy`].
    pub fn decode(&self, ids: &[u32], render_special: bool) -> Result<String, TokenizerError> {
        let bytes = self.decode_bytes(ids, render_special)?;
        String::from_utf8(bytes).map_err(|e| TokenizerError::InvalidUtf8 {
            valid_up_to: e.utf8_error().valid_up_to(),
        })
    }

    /// Ids to text, never failing: ids outside the vocabulary are skipped and invalid
    /// UTF-8 becomes U+FFFD.
    pub fn decode_lossy(&self, ids: &[u32], render_special: bool) -> String {
        let known: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|&id| (id as usize) < self.vocab.len())
            .collect();
        let bytes = self
            .decode_bytes(&known, render_special)
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The most bytes of text one token stands for (its spelling in the vocabulary, which is
    /// at least as long as the text it encodes): `n` tokens cover at most `n` times this.
    pub fn max_token_bytes(&self) -> usize {
        (0..self.vocab_size() as u32)
            .filter_map(|id| self.token_text(id))
            .map(str::len)
            .max()
            .unwrap_or(1)
            .max(1)
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }
    pub fn bos(&self) -> Option<u32> {
        self.vocab.bos
    }
    pub fn eos(&self) -> Option<u32> {
        self.vocab.eos
    }
    /// End of turn (`<|im_end|>`, `<|eot_id|>`, ...): metadata, else found by its text.
    pub fn eot(&self) -> Option<u32> {
        self.vocab.eot
    }
    pub fn unk(&self) -> Option<u32> {
        self.vocab.unk
    }
    pub fn pad(&self) -> Option<u32> {
        self.vocab.pad
    }
    /// Whether BOS is prepended by `encode(.., add_special = true, ..)`.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }
    /// Whether generation should stop at `id` (llama.cpp's `llama_vocab_is_eog`).
    pub fn is_eog(&self, id: u32) -> bool {
        self.vocab.eog.binary_search(&id).is_ok()
    }
    /// All end-of-generation ids, sorted.
    pub fn eog_ids(&self) -> &[u32] {
        &self.vocab.eog
    }
    /// The token's text as stored in the vocabulary (byte-level form for gpt2).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.texts.get(id)
    }
    pub fn token_kind(&self, id: u32) -> Option<TokenKind> {
        self.vocab.kind(id)
    }
    /// The id of a token by its exact vocabulary text (e.g. `"<|im_end|>"`).
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.id(text)
    }
    /// The BOS/EOS token texts, for the chat template's `bos_token`/`eos_token`.
    pub fn bos_text(&self) -> &str {
        self.vocab
            .bos
            .and_then(|id| self.token_text(id))
            .unwrap_or("")
    }
    pub fn eos_text(&self) -> &str {
        self.vocab
            .eos
            .and_then(|id| self.token_text(id))
            .unwrap_or("")
    }
    /// `tokenizer.chat_template`, passed through from the spec.
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    pub fn summary(&self) -> TokenizerSummary {
        TokenizerSummary {
            model: self.model_name.clone(),
            pre: self.pre_name.clone(),
            vocab_size: self.vocab.len(),
            merges: match &self.model {
                Model::Bpe { bpe, .. } => bpe.merges_len(),
                Model::Spm => 0,
            },
            special_tokens: self.specials.len(),
            bos: self.vocab.bos,
            eos: self.vocab.eos,
            eot: self.vocab.eot,
            unk: self.vocab.unk,
            pad: self.vocab.pad,
            eog: self.vocab.eog.clone(),
            add_bos: self.add_bos,
            add_eos: self.add_eos,
        }
    }

    fn unknown_id(&self, id: u32) -> TokenizerError {
        TokenizerError::UnknownTokenId {
            id,
            vocab_size: self.vocab.len(),
        }
    }
}

/// llama.cpp's `token_to_piece(id, special = true)` for one token, appended to `out`.
fn render_piece(vocab: &Vocab, model: &Model, id: u32, out: &mut Vec<u8>) {
    let text = vocab.text(id);
    match vocab.kind(id) {
        Some(TokenKind::Control | TokenKind::Unknown | TokenKind::UserDefined) => {
            out.extend_from_slice(text.as_bytes())
        }
        Some(TokenKind::Normal) => match model {
            Model::Bpe { .. } => byte_level::decode_token_text(text, out),
            Model::Spm => out.extend_from_slice(text.replace(spm::SPACE, " ").as_bytes()),
        },
        // `<0xNN>`; a malformed byte token renders as nothing.
        Some(TokenKind::Byte) => out.extend(
            text.get(3..5)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok()),
        ),
        // Unused and undefined tokens render as nothing, as in llama.cpp.
        _ => {}
    }
}
