//! Splitting text around special tokens before pre-tokenization, as llama.cpp's
//! `tokenizer_st_partition`: control, user-defined and unknown tokens are matched as
//! whole strings, longest first; each one splits every text fragment left by the longer
//! ones. With `parse_special` off only user-defined tokens are matched (as Hugging Face
//! does), so `<|im_start|>` typed by a user stays plain text.

use std::ops::Range;

use super::vocab::{TokenKind, Vocab};

/// A piece of the input: raw text (a byte range of it) or a matched special token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    Text(Range<usize>),
    Token(u32),
}

/// Ids of the tokens matched as whole strings, longest text first (ties by id, where
/// llama.cpp's unstable sort leaves the order open).
pub(crate) fn special_ids(vocab: &Vocab) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..vocab.len() as u32)
        .filter(|&id| {
            matches!(
                vocab.kind(id),
                Some(TokenKind::Control | TokenKind::UserDefined | TokenKind::Unknown)
            ) && !vocab.texts[id as usize].is_empty()
        })
        .collect();
    ids.sort_by(|a, b| {
        vocab.texts[*b as usize]
            .len()
            .cmp(&vocab.texts[*a as usize].len())
            .then(a.cmp(b))
    });
    ids
}

pub(crate) fn partition(
    vocab: &Vocab,
    specials: &[u32],
    text: &str,
    parse_special: bool,
) -> Vec<Fragment> {
    let mut frags = Vec::new();
    if text.is_empty() {
        return frags;
    }
    frags.push(Fragment::Text(0..text.len()));
    for &id in specials {
        if !parse_special && vocab.kind(id).is_some_and(TokenKind::is_special) {
            continue;
        }
        let needle = vocab.texts[id as usize].as_str();
        // Cheap pre-check: most special tokens do not occur at all.
        if !frags
            .iter()
            .any(|f| matches!(f, Fragment::Text(r) if text[r.clone()].contains(needle)))
        {
            continue;
        }
        let mut next = Vec::with_capacity(frags.len() + 2);
        for frag in frags {
            let Fragment::Text(range) = frag else {
                next.push(frag);
                continue;
            };
            let mut start = range.start;
            for (pos, _) in text[range.clone()].match_indices(needle) {
                let at = range.start + pos;
                if at > start {
                    next.push(Fragment::Text(start..at));
                }
                next.push(Fragment::Token(id));
                start = at + needle.len();
            }
            if start < range.end {
                next.push(Fragment::Text(start..range.end));
            }
        }
        frags = next;
    }
    frags
}
