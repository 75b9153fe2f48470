//! Walks of the vocabulary trie that give DFA states their token masks: one state at a time
//! (`Walk::mask`, the reference), or a batch of states carried together over part of the trie
//! (`Walk::masks`, what `TokenAutomaton::new` uses), within the compile's bound on work.

use super::byte_dfa::{ByteDfa, DEAD};
use super::error::ConstraintError;
use super::vocab_bytes::VocabBytes;

/// Trie nodes visited while compiling at most (the compile-time bound: ~4 s natively on the
/// H200 machine's host over Gemma 3's 262k tokens, 2026-11-28).
pub const MAX_VISITS: u64 = 200_000_000;

/// A state's mask before the end-of-generation ids: the text tokens whose bytes keep the DFA
/// alive from it, and whether there is any.
pub(super) struct TextMask {
    pub bits: Vec<u32>,
    pub any_text: bool,
    pub accepting: bool,
}

/// The trie walk (with its bound on the nodes visited, over the whole compile).
#[derive(Default)]
pub(super) struct Walk {
    pub visits: u64,
    stack: Vec<(u32, u32)>,
}

impl Walk {
    /// `s`'s mask; `reached(next, id)` for each state a token `id` leads to.
    pub fn mask(
        &mut self,
        dfa: &ByteDfa,
        vocab: &VocabBytes,
        s: u32,
        mut reached: impl FnMut(u32, u32),
    ) -> Result<TextMask, ConstraintError> {
        let mut bits = vec![0u32; vocab.words() as usize];
        let mut any_text = false;
        self.stack.clear();
        self.stack.push((0, s));
        while let Some((node, state)) = self.stack.pop() {
            self.visits += 1;
            if self.visits > MAX_VISITS {
                return Err(ConstraintError::TooLarge {
                    what: "compile work (vocabulary trie nodes visited)",
                    needed: self.visits,
                    limit: MAX_VISITS,
                });
            }
            for (b, child) in vocab.trie.children(node) {
                let next = dfa.next(state, b);
                if next == DEAD {
                    continue;
                }
                let ends = vocab.trie.ends(child);
                if !ends.is_empty() {
                    any_text = true;
                    for &id in ends {
                        bits[id as usize / 32] |= 1 << (id % 32);
                    }
                    reached(next, ends[0]);
                }
                self.stack.push((child, next));
            }
        }
        let accepting = dfa.accepting[s as usize];
        if accepting {
            for &id in &vocab.eog {
                if id < vocab.n_vocab {
                    bits[id as usize / 32] |= 1 << (id % 32);
                }
            }
        }
        let accepting = accepting && !vocab.eog.is_empty();
        Ok(TextMask {
            bits,
            any_text,
            accepting,
        })
    }
}

/// The depth at which [`TokenAutomaton::by_split_classes`] splits this vocabulary's trie: the
/// one that minimises the work of one bounded string (every position within the longest token
/// of its bound a class of its own): `k + 1` walks over the nodes of depth ≤ `k`, and one per
/// position (longest + 1) over the nodes on the paths to the tokens longer than `k`.
pub(super) fn shallow_depth(vocab: &VocabBytes) -> usize {
    let longest = vocab.longest_token();
    let (depth, subtree_longest) = vocab.trie.depths_and_longest();
    let mut at_depth = vec![0u64; longest + 2];
    let mut deep_at = vec![0u64; longest + 2]; // nodes whose longest token below is this long
    for (&d, &l) in depth.iter().zip(&subtree_longest) {
        at_depth[(d as usize).min(longest + 1)] += 1;
        deep_at[(l as usize).min(longest + 1)] += 1;
    }
    let mut best = (u64::MAX, longest);
    let mut shallow = 0u64;
    let mut deep: u64 = deep_at.iter().sum(); // nodes with a token longer than k below
    for k in 0..=longest {
        shallow += at_depth[k];
        deep -= deep_at[k];
        let cost = (k as u64 + 1) * shallow + (longest as u64 + 1) * deep;
        if cost < best.0 {
            best = (cost, k);
        }
    }
    best.1
}

/// States whose masks [`Walk::masks`] computes in one walk of the trie.
pub(super) const BATCH: usize = 32;

/// [`Walk::masks`]' state during its walk.
struct Batch<'a> {
    dfa: &'a ByteDfa,
    vocab: &'a VocabBytes,
    words: usize,
    /// `[i * words + w]`: state i's mask.
    bits: Vec<u32>,
    any_text: Vec<bool>,
    /// (batch index, DFA state) pairs alive at each node of the current path, one segment per
    /// depth.
    alive: Vec<(u32, u32)>,
    reach: &'a Reach<'a>,
}

/// Which part of the trie [`Walk::masks`] walks.
pub(super) struct Reach<'a> {
    /// Down to this depth (tokens of at most this many bytes).
    pub depth: usize,
    /// Only tokens longer than this.
    pub ends_below: usize,
    /// Each node's longest token below it: the walk enters only subtrees holding a token
    /// longer than `ends_below`.
    pub subtree_longest: Option<&'a [u32]>,
}

impl Walk {
    /// Adds `n` steps to the compile work, within [`MAX_VISITS`].
    pub fn count(&mut self, n: u64) -> Result<(), ConstraintError> {
        self.visits += n;
        if self.visits > MAX_VISITS {
            return Err(ConstraintError::TooLarge {
                what: "compile work (vocabulary trie nodes visited)",
                needed: self.visits,
                limit: MAX_VISITS,
            });
        }
        Ok(())
    }

    /// The masks of `states` (at most [`BATCH`]) in one depth-first walk of the trie that
    /// carries every state still alive: what [`Walk::mask`] computes for each, over the tokens
    /// of at most `depth` bytes, with the trie traversed once instead of once per state.
    /// `visits` counts (node, state) pairs, as the walks one state at a time count them.
    pub fn masks(
        &mut self,
        dfa: &ByteDfa,
        vocab: &VocabBytes,
        states: &[u32],
        reach: &Reach,
    ) -> Result<Vec<TextMask>, ConstraintError> {
        let words = vocab.words() as usize;
        let mut b = Batch {
            dfa,
            vocab,
            words,
            bits: vec![0u32; words * states.len()],
            any_text: vec![false; states.len()],
            alive: states
                .iter()
                .enumerate()
                .map(|(i, &s)| (i as u32, s))
                .collect(),
            reach,
        };
        self.descend(&mut b, 0, 0, 0)?;
        let mut out = Vec::with_capacity(states.len());
        for (i, &s) in states.iter().enumerate() {
            let mut bits = b.bits[i * words..(i + 1) * words].to_vec();
            let accepting = dfa.accepting[s as usize];
            if accepting {
                for &id in &vocab.eog {
                    if id < vocab.n_vocab {
                        bits[id as usize / 32] |= 1 << (id % 32);
                    }
                }
            }
            out.push(TextMask {
                bits,
                any_text: b.any_text[i],
                accepting: accepting && !vocab.eog.is_empty(),
            });
        }
        Ok(out)
    }

    /// Visits `node`, whose alive pairs are `b.alive[from..]`, and the subtrees below it
    /// (recursion depth: the longest token's bytes).
    fn descend(
        &mut self,
        b: &mut Batch,
        node: u32,
        depth: usize,
        from: usize,
    ) -> Result<(), ConstraintError> {
        let here = b.alive.len();
        self.count((here - from) as u64)?;
        if depth == b.reach.depth {
            return Ok(());
        }
        for (byte, child) in b.vocab.trie.children(node) {
            if let Some(longest) = b.reach.subtree_longest {
                if longest[child as usize] as usize <= b.reach.ends_below {
                    continue;
                }
            }
            for k in from..here {
                let (i, s) = b.alive[k];
                let next = b.dfa.next(s, byte);
                if next != DEAD {
                    b.alive.push((i, next));
                }
            }
            if b.alive.len() == here {
                continue;
            }
            let ends = b.vocab.trie.ends(child);
            if !ends.is_empty() && depth + 1 > b.reach.ends_below {
                for k in here..b.alive.len() {
                    let i = b.alive[k].0 as usize;
                    b.any_text[i] = true;
                    let row = &mut b.bits[i * b.words..(i + 1) * b.words];
                    for &id in ends {
                        row[id as usize / 32] |= 1 << (id % 32);
                    }
                }
            }
            self.descend(b, child, depth + 1, here)?;
            b.alive.truncate(here);
        }
        Ok(())
    }
}
