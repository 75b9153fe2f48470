//! Byte-level BPE ("gpt2" model): merges by rank inside each pre-tokenized word,
//! following llama.cpp's `llm_tokenizer_bpe_session::tokenize`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::byte_level;
use super::vocab::Vocab;

/// Id for a symbol text that is neither a token nor the result of any merge: it can
/// never merge, and at the end it falls back to single-byte tokens.
const NO_SYMBOL: u32 = u32::MAX;

/// Merge table with every string interned as an integer. Token texts keep their token
/// id; texts that appear only in merges (a merge result that is not a token) get ids
/// from `vocab.len()` up, so the hot loop compares integers, not strings.
#[derive(Clone, Debug)]
pub(crate) struct BpeModel {
    /// (left, right) -> (rank, merged).
    merges: HashMap<(u32, u32), (u32, u32)>,
    extra: HashMap<String, u32>,
    pub ignore_merges: bool,
}

impl BpeModel {
    pub(crate) fn new(vocab: &Vocab, merges: &[String], ignore_merges: bool) -> BpeModel {
        let mut model = BpeModel {
            merges: HashMap::with_capacity(merges.len()),
            extra: HashMap::new(),
            ignore_merges,
        };
        for (rank, line) in merges.iter().enumerate() {
            // llama.cpp splits at the first space after the first byte, so a merge whose
            // left side is a lone space still parses; a line without one is skipped.
            let Some(pos) = line.bytes().skip(1).position(|b| b == b' ').map(|p| p + 1) else {
                continue;
            };
            let (left, right) = (&line[..pos], &line[pos + 1..]);
            let l = model.intern(vocab, left);
            let r = model.intern(vocab, right);
            let merged = model.intern(vocab, &format!("{left}{right}"));
            // A repeated pair keeps its first (best) rank, like std::map::emplace.
            model.merges.entry((l, r)).or_insert((rank as u32, merged));
        }
        model
    }

    pub(crate) fn merges_len(&self) -> usize {
        self.merges.len()
    }

    fn intern(&mut self, vocab: &Vocab, text: &str) -> u32 {
        if let Some(id) = vocab.id(text) {
            return id;
        }
        let next = (vocab.len() + self.extra.len()) as u32;
        *self.extra.entry(text.to_string()).or_insert(next)
    }

    fn lookup(&self, vocab: &Vocab, text: &str) -> u32 {
        vocab
            .id(text)
            .or_else(|| self.extra.get(text).copied())
            .unwrap_or(NO_SYMBOL)
    }

    /// Tokenizes one pre-tokenized word (raw text), appending ids to `out`.
    pub(crate) fn encode_word(
        &self,
        vocab: &Vocab,
        word: &str,
        scratch: &mut String,
        out: &mut Vec<u32>,
    ) {
        scratch.clear();
        byte_level::encode_into(word, scratch);
        let word = scratch.as_str();
        if self.ignore_merges {
            if let Some(id) = vocab.id(word) {
                out.push(id);
                return;
            }
        }
        let mut syms: Vec<Symbol> = Vec::with_capacity(word.len());
        for (start, c) in word.char_indices() {
            let end = start + c.len_utf8();
            let i = syms.len() as i32;
            syms.push(Symbol {
                start,
                end,
                id: self.lookup(vocab, &word[start..end]),
                prev: i - 1,
                next: i + 1,
            });
        }
        if let Some(last) = syms.last_mut() {
            last.next = -1;
        }
        let mut queue = BinaryHeap::new();
        for i in 1..syms.len() {
            self.push_pair(&syms, i - 1, i, &mut queue);
        }
        // Lowest rank first; ties go to the leftmost pair (llama.cpp's comparator).
        while let Some(Reverse(Pair {
            left,
            right,
            l_id,
            r_id,
            ..
        })) = queue.pop()
        {
            let (ls, rs) = (&syms[left], &syms[right]);
            // Skip pairs made stale by an earlier merge of either side.
            if ls.end == ls.start
                || rs.end == rs.start
                || ls.id != l_id
                || rs.id != r_id
                || ls.next != right as i32
            {
                continue;
            }
            let merged = self.merges.get(&(l_id, r_id)).map_or(NO_SYMBOL, |m| m.1);
            let right_next = rs.next;
            let right_end = rs.end;
            let ls = &mut syms[left];
            ls.end = right_end;
            ls.id = merged;
            ls.next = right_next;
            let rs = &mut syms[right];
            rs.start = rs.end; // emptied
            if right_next >= 0 {
                syms[right_next as usize].prev = left as i32;
            }
            let prev = syms[left].prev;
            if prev >= 0 {
                self.push_pair(&syms, prev as usize, left, &mut queue);
            }
            if right_next >= 0 {
                self.push_pair(&syms, left, right_next as usize, &mut queue);
            }
        }
        for s in syms.iter().filter(|s| s.end > s.start) {
            if (s.id as usize) < vocab.len() {
                out.push(s.id);
            } else {
                // Not a token: llama.cpp emits the token of each single byte of the
                // byte-level text that has one (only ASCII bytes can), dropping the rest.
                for b in word[s.start..s.end].bytes().filter(u8::is_ascii) {
                    if let Some(id) = vocab.id(char::from(b).encode_utf8(&mut [0; 4])) {
                        out.push(id);
                    }
                }
            }
        }
    }

    fn push_pair(
        &self,
        syms: &[Symbol],
        left: usize,
        right: usize,
        queue: &mut BinaryHeap<Reverse<Pair>>,
    ) {
        let (l_id, r_id) = (syms[left].id, syms[right].id);
        if l_id == NO_SYMBOL || r_id == NO_SYMBOL {
            return;
        }
        if let Some(&(rank, _)) = self.merges.get(&(l_id, r_id)) {
            queue.push(Reverse(Pair {
                rank,
                left,
                right,
                l_id,
                r_id,
            }));
        }
    }
}

/// A run of the word's byte-level text; `start == end` once merged into its left neighbour.
#[derive(Clone, Copy, Debug)]
struct Symbol {
    start: usize,
    end: usize,
    id: u32,
    prev: i32,
    next: i32,
}

/// A candidate merge. Field order gives the ordering: rank, then leftmost position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pair {
    rank: u32,
    left: usize,
    right: usize,
    l_id: u32,
    r_id: u32,
}
