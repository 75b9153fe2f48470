//! A byte DFA lifted to a model's tokens: for every DFA state a token sequence can reach from
//! the start, the mask of ids allowed there (text tokens whose bytes keep the DFA alive;
//! end-of-generation ids exactly where the text so far is a whole match). Masks are shared
//! between states that allow the same ids. This is also the CPU reference of the constraint
//! engine: [`TokenAutomaton::allowed`] and [`TokenAutomaton::advance`] are what the GPU kernels
//! (constraint_mask.wgsl, `advance_constraint` in sample_choose.wgsl) compute.

use super::byte_dfa::{ByteDfa, DEAD};
use super::error::ConstraintError;
use super::vocab_bytes::VocabBytes;
use std::collections::HashMap;
use std::sync::Arc;

/// Trie nodes visited while compiling at most (the compile-time bound: ~4 s natively on the
/// H200 machine's host over Gemma 3's 262k tokens, 2026-11-28).
pub const MAX_VISITS: u64 = 200_000_000;
/// Mask words (4 bytes each) a constraint may hold at most: 64 MiB.
pub const MAX_MASK_WORDS: usize = 16 << 20;
/// No state: a token-level state index for DFA states no token sequence reaches.
pub const UNREACHED: u32 = u32::MAX;

#[derive(Debug)]
pub struct TokenAutomaton {
    pub dfa: ByteDfa,
    pub vocab: Arc<VocabBytes>,
    /// DFA state → index of its mask in `masks` (UNREACHED for states tokens never reach).
    pub mask_of_state: Vec<u32>,
    /// `[mask * words + w]`: bit `id % 32` of word `id / 32` set when id is allowed.
    pub masks: Vec<u32>,
    /// Trie nodes the compilation visited.
    pub visits: u64,
}

impl TokenAutomaton {
    pub fn new(dfa: ByteDfa, vocab: Arc<VocabBytes>) -> Result<Self, ConstraintError> {
        let words = vocab.words() as usize;
        let n = dfa.n_states() as usize;
        let mut mask_of_state = vec![UNREACHED; n];
        let mut masks: Vec<u32> = Vec::new();
        let mut unique: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut queue = vec![dfa.start];
        let mut queued = vec![false; n];
        queued[dfa.start as usize] = true;
        // How each state was first reached: (previous state, token), for error messages.
        let mut came_from: HashMap<u32, (u32, u32)> = HashMap::new();
        let mut visits = 0u64;
        let mut stack: Vec<(u32, u32)> = Vec::new();
        let mut at = 0;
        while at < queue.len() {
            let s = queue[at];
            at += 1;
            let mut mask = vec![0u32; words];
            let mut any_text = false;
            stack.clear();
            stack.push((0, s));
            while let Some((node, state)) = stack.pop() {
                visits += 1;
                if visits > MAX_VISITS {
                    return Err(ConstraintError::TooLarge {
                        what: "compile work (vocabulary trie nodes visited)",
                        needed: visits,
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
                            mask[id as usize / 32] |= 1 << (id % 32);
                        }
                        if !queued[next as usize] {
                            queued[next as usize] = true;
                            came_from.insert(next, (s, ends[0]));
                            queue.push(next);
                        }
                    }
                    stack.push((child, next));
                }
            }
            let accepting = dfa.accepting[s as usize];
            if accepting {
                for &id in &vocab.eog {
                    if id < vocab.n_vocab {
                        mask[id as usize / 32] |= 1 << (id % 32);
                    }
                }
            }
            let can_end = accepting && !vocab.eog.is_empty();
            if !any_text && !can_end {
                // The shortest token path found to this state, as text.
                let mut path = Vec::new();
                let mut at_state = s;
                while let Some(&(prev, id)) = came_from.get(&at_state) {
                    path.push(id);
                    at_state = prev;
                }
                let text: Vec<u8> = path
                    .iter()
                    .rev()
                    .flat_map(|&id| vocab.token(id).to_vec())
                    .collect();
                let after = String::from_utf8_lossy(&text);
                return Err(ConstraintError::DeadEnd {
                    reason: if accepting {
                        format!("after {after:?} the text can end, but the model has no end-of-generation token")
                    } else {
                        format!("after {after:?} no token of this vocabulary continues the text")
                    },
                });
            }
            let next_index = unique.len() as u32;
            let index = *unique.entry(mask).or_insert_with_key(|m| {
                masks.extend_from_slice(m);
                next_index
            });
            if masks.len() > MAX_MASK_WORDS {
                return Err(ConstraintError::TooLarge {
                    what: "token masks (bytes)",
                    needed: masks.len() as u64 * 4,
                    limit: MAX_MASK_WORDS as u64 * 4,
                });
            }
            mask_of_state[s as usize] = index;
        }
        Ok(Self {
            dfa,
            vocab,
            mask_of_state,
            masks,
            visits,
        })
    }

    pub fn start(&self) -> u32 {
        self.dfa.start
    }

    pub fn words(&self) -> u32 {
        self.vocab.words()
    }

    /// Distinct masks.
    pub fn n_masks(&self) -> u32 {
        (self.masks.len() / self.words() as usize) as u32
    }

    /// States tokens reach.
    pub fn n_token_states(&self) -> u32 {
        self.mask_of_state
            .iter()
            .filter(|&&m| m != UNREACHED)
            .count() as u32
    }

    /// The mask of `state` (one bit per id).
    pub fn mask(&self, state: u32) -> &[u32] {
        let w = self.words() as usize;
        let m = self.mask_of_state[state as usize];
        assert!(
            m != UNREACHED,
            "constraint state {state} is not reached by tokens"
        );
        &self.masks[m as usize * w..(m as usize + 1) * w]
    }

    pub fn allowed(&self, state: u32, id: u32) -> bool {
        id < self.vocab.n_vocab && self.mask(state)[id as usize / 32] >> (id % 32) & 1 == 1
    }

    /// The state after generating `id` (an end-of-generation id leaves it as it is).
    pub fn advance(&self, state: u32, id: u32) -> u32 {
        self.dfa.walk(state, self.vocab.token(id))
    }

    pub fn is_accepting(&self, state: u32) -> bool {
        self.dfa.accepting[state as usize]
    }

    /// The ids allowed in `state`, ascending.
    pub fn allowed_ids(&self, state: u32) -> Vec<u32> {
        let mut ids = Vec::new();
        for (w, &bits) in self.mask(state).iter().enumerate() {
            let mut b = bits;
            while b != 0 {
                let i = b.trailing_zeros();
                ids.push(w as u32 * 32 + i);
                b &= b - 1;
            }
        }
        ids
    }
}
