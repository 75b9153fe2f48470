//! Splitting text around special tokens before pre-tokenization: control, user-defined
//! and unknown tokens are matched as whole strings with one Aho–Corasick automaton
//! (leftmost-longest, as Hugging Face's `AddedVocabulary` matches them), so the cost is
//! linear in the text whatever the number of special tokens. With `parse_special` off
//! only user-defined tokens are matched (as Hugging Face does), so `<|im_start|>` typed
//! by a user stays plain text.
//!
//! llama.cpp's `tokenizer_st_partition` instead takes the longest token first over the
//! whole text, then the next longest in what is left (cost: special tokens × text). The two
//! differ only where two special tokens overlap in the text and the shorter one starts
//! first (`ab` + `bcd` in `abcd`: here `ab`, `c`, `d`; llama.cpp `a`, `bcd`); no vocabulary
//! in `tests/fixtures` has such a pair.

use std::ops::Range;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use super::error::TokenizerError;
use super::vocab::{TokenKind, Vocab};

/// A piece of the input: raw text (a byte range of it) or a matched special token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    Text(Range<usize>),
    Token(u32),
}

/// One automaton over a set of token texts; pattern `i` is token `ids[i]`.
#[derive(Clone, Debug)]
struct Matcher {
    automaton: Option<AhoCorasick>,
    ids: Vec<u32>,
}

impl Matcher {
    /// `ids` in priority order: among equal texts the first wins.
    fn new(vocab: &Vocab, ids: Vec<u32>) -> Result<Matcher, TokenizerError> {
        if ids.is_empty() {
            return Ok(Matcher {
                automaton: None,
                ids,
            });
        }
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            // A contiguous NFA: memory in proportion to the patterns' bytes (a DFA's
            // tables would grow with patterns × alphabet classes).
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .build(ids.iter().map(|&id| vocab.text(id).as_bytes()))
            .map_err(|e| TokenizerError::SpecialTokens(e.to_string()))?;
        Ok(Matcher {
            automaton: Some(automaton),
            ids,
        })
    }

    fn partition(&self, text: &str, frags: &mut Vec<Fragment>) {
        let mut start = 0;
        if let Some(automaton) = &self.automaton {
            for m in automaton.find_iter(text) {
                if m.start() > start {
                    frags.push(Fragment::Text(start..m.start()));
                }
                frags.push(Fragment::Token(self.ids[m.pattern().as_usize()]));
                start = m.end();
            }
        }
        if start < text.len() {
            frags.push(Fragment::Text(start..text.len()));
        }
    }
}

/// The tokens matched whole in text: every special one, and the user-defined ones alone
/// (what is matched with `parse_special` off).
#[derive(Clone, Debug)]
pub(crate) struct SpecialTokens {
    all: Matcher,
    user_defined: Matcher,
}

impl SpecialTokens {
    pub(crate) fn new(vocab: &Vocab) -> Result<SpecialTokens, TokenizerError> {
        let ids: Vec<u32> = (0..vocab.len() as u32)
            .filter(|&id| {
                matches!(
                    vocab.kind(id),
                    Some(TokenKind::Control | TokenKind::UserDefined | TokenKind::Unknown)
                ) && !vocab.text(id).is_empty()
            })
            .collect();
        let user: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|&id| !vocab.kind(id).is_some_and(TokenKind::is_special))
            .collect();
        Ok(SpecialTokens {
            all: Matcher::new(vocab, ids)?,
            user_defined: Matcher::new(vocab, user)?,
        })
    }

    /// How many tokens are matched whole with `parse_special` on.
    pub(crate) fn len(&self) -> usize {
        self.all.ids.len()
    }

    /// `text` cut into plain text and special tokens, in order, in one pass.
    pub(crate) fn partition(&self, text: &str, parse_special: bool) -> Vec<Fragment> {
        let mut frags = Vec::new();
        let matcher = if parse_special {
            &self.all
        } else {
            &self.user_defined
        };
        matcher.partition(text, &mut frags);
        frags
    }
}
