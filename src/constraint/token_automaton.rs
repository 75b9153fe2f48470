//! A byte DFA lifted to a model's tokens: for every DFA state a token sequence can reach from
//! the start, the mask of ids allowed there (text tokens whose bytes keep the DFA alive;
//! end-of-generation ids exactly where the text so far is a whole match). Masks are shared
//! between states that allow the same ids. This is also the CPU reference of the constraint
//! engine: [`TokenAutomaton::allowed`] and [`TokenAutomaton::advance`] are what the GPU kernels
//! (constraint_mask.wgsl, `advance_constraint` in sample_choose.wgsl) compute.

use super::byte_dfa::{ByteDfa, DEAD};
use super::error::ConstraintError;
use super::trie_walk::{shallow_depth, Reach, TextMask, Walk, BATCH};
use super::vocab_bytes::VocabBytes;
use std::collections::HashMap;
use std::sync::Arc;

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
    /// The masks of every state tokens reach ([`token_reachable`]). States that must have the
    /// same mask ([`mask_classes`]) share one: inside a bounded string, every position far
    /// enough from the bound. The classes' masks come [`BATCH`] at a time from one walk of the
    /// vocabulary trie each ([`Walk::masks`]). [`TokenAutomaton::by_walks`], one walk per
    /// state, is the reference it is tested against.
    pub fn new(dfa: ByteDfa, vocab: Arc<VocabBytes>) -> Result<Self, ConstraintError> {
        Self::by_classes(dfa, vocab)
    }

    fn by_classes(dfa: ByteDfa, vocab: Arc<VocabBytes>) -> Result<Self, ConstraintError> {
        let split = shallow_depth(&vocab);
        Self::by_split_classes(dfa, vocab, split)
    }

    /// [`TokenAutomaton::new`] with the trie split at depth `split`: states whose masks must
    /// agree on the tokens of at most `split` bytes ([`mask_classes`] at that depth) share a
    /// walk of the trie down to that depth; each class at the full depth then adds the longer
    /// tokens one by one. Inside a bounded string that is `split` + 1 shallow walks per string
    /// instead of one per position within the longest token of the bound (48 on Gemma 3's
    /// vocabulary, whose tokens are mostly much shorter). `split` ≥ the longest token: no split.
    pub fn by_split_classes(
        dfa: ByteDfa,
        vocab: Arc<VocabBytes>,
        split: usize,
    ) -> Result<Self, ConstraintError> {
        let n = dfa.n_states() as usize;
        let longest = vocab.longest_token();
        let split = split.min(longest);
        let reached = token_reachable(&dfa, &vocab);
        let class = mask_classes(&dfa, longest);
        let shallow_class = if split < longest {
            mask_classes(&dfa, split)
        } else {
            class.clone()
        };
        let (_, subtree_longest) = vocab.trie.depths_and_longest();
        let mut mask_of_state = vec![UNREACHED; n];
        let mut masks = Masks::new();
        let mut walk = Walk::default();
        // One state per class, in the order the states come, grouped by shallow class.
        let mut walked = vec![false; n];
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut shallow_reps = Vec::new();
        for s in (1..n as u32).filter(|&s| reached[s as usize]) {
            if std::mem::replace(&mut walked[class[s as usize] as usize], true) {
                continue;
            }
            let group = &mut members[shallow_class[s as usize] as usize];
            if group.is_empty() {
                shallow_reps.push(s);
            }
            group.push(s);
        }
        // The shallow classes' masks BATCH at a time, each batch in one walk of the trie down
        // to `split`; then their classes' masks, BATCH at a time: the shallow mask and the
        // tokens longer than `split`, from a walk of only the paths to those tokens.
        let shallow_only = Reach {
            depth: split,
            ends_below: 0,
            subtree_longest: None,
        };
        let deep_only = Reach {
            depth: usize::MAX,
            ends_below: split,
            subtree_longest: Some(&subtree_longest),
        };
        let mut mask_of_class: Vec<u32> = vec![UNREACHED; n];
        for batch in shallow_reps.chunks(BATCH) {
            let bases = walk.masks(&dfa, &vocab, batch, &shallow_only)?;
            let states: Vec<(u32, usize)> = batch
                .iter()
                .enumerate()
                .flat_map(|(i, &r)| {
                    members[shallow_class[r as usize] as usize]
                        .iter()
                        .map(move |&s| (s, i))
                })
                .collect();
            for group in states.chunks(BATCH) {
                let reps: Vec<u32> = group.iter().map(|&(s, _)| s).collect();
                let deep = if split < longest {
                    Some(walk.masks(&dfa, &vocab, &reps, &deep_only)?)
                } else {
                    None
                };
                for (k, &(s, i)) in group.iter().enumerate() {
                    let base = &bases[i];
                    let mut mask = TextMask {
                        bits: base.bits.clone(),
                        any_text: base.any_text,
                        accepting: base.accepting,
                    };
                    if let Some(deep) = &deep {
                        for (w, d) in mask.bits.iter_mut().zip(&deep[k].bits) {
                            *w |= d;
                        }
                        mask.any_text |= deep[k].any_text;
                    }
                    let m = masks.add(mask, || {
                        let path = byte_path(&dfa, s);
                        dead_end(&dfa, s, &String::from_utf8_lossy(&path))
                    })?;
                    mask_of_class[class[s as usize] as usize] = m;
                }
            }
        }
        for s in (1..n as u32).filter(|&s| reached[s as usize]) {
            mask_of_state[s as usize] = mask_of_class[class[s as usize] as usize];
        }
        Ok(Self {
            dfa,
            vocab,
            mask_of_state,
            masks: masks.words,
            visits: walk.visits,
        })
    }

    /// Breadth-first over the states tokens reach, one trie walk each (any vocabulary; the
    /// reference [`TokenAutomaton::new`]'s shared walks are tested against).
    pub fn by_walks(dfa: ByteDfa, vocab: Arc<VocabBytes>) -> Result<Self, ConstraintError> {
        let n = dfa.n_states() as usize;
        let mut mask_of_state = vec![UNREACHED; n];
        let mut masks = Masks::new();
        let mut queue = vec![dfa.start];
        let mut queued = vec![false; n];
        queued[dfa.start as usize] = true;
        // How each state was first reached: (previous state, token), for error messages.
        let mut came_from: HashMap<u32, (u32, u32)> = HashMap::new();
        let mut walk = Walk::default();
        let mut at = 0;
        while at < queue.len() {
            let s = queue[at];
            at += 1;
            let mask = walk.mask(&dfa, &vocab, s, |next, id| {
                if !queued[next as usize] {
                    queued[next as usize] = true;
                    came_from.insert(next, (s, id));
                    queue.push(next);
                }
            })?;
            let m = masks.add(mask, || {
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
                dead_end(&dfa, s, &String::from_utf8_lossy(&text))
            })?;
            mask_of_state[s as usize] = m;
        }
        Ok(Self {
            dfa,
            vocab,
            mask_of_state,
            masks: masks.words,
            visits: walk.visits,
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

/// The DFA states some token sequence reaches from the start. A token whose bytes are all
/// single-byte tokens reaches nothing that those bytes, one token each, do not (every prefix of
/// an allowed token keeps the DFA alive), so the closure is taken under the single-byte tokens
/// and the few tokens holding a byte that is no token of its own (byte-level vocabularies may
/// lack control bytes and bytes UTF-8 never has).
fn token_reachable(dfa: &ByteDfa, vocab: &VocabBytes) -> Vec<bool> {
    let single = vocab.trie.single_byte_tokens();
    let singles: Vec<u8> = (0..=255u8).filter(|&b| single[b as usize]).collect();
    let others: Vec<u32> = (0..vocab.n_vocab)
        .filter(|&id| {
            let t = vocab.token(id);
            t.len() > 1 && t.iter().any(|&b| !single[b as usize])
        })
        .collect();
    let mut reached = vec![false; dfa.n_states() as usize];
    reached[dfa.start as usize] = true;
    let mut queue = vec![dfa.start];
    while let Some(s) = queue.pop() {
        let next = singles
            .iter()
            .map(|&b| dfa.next(s, b))
            .chain(others.iter().map(|&id| dfa.walk(s, vocab.token(id))));
        for t in next {
            if t != DEAD && !reached[t as usize] {
                reached[t as usize] = true;
                queue.push(t);
            }
        }
    }
    reached
}

/// The distinct masks, one after another, within [`MAX_MASK_WORDS`].
struct Masks {
    words: Vec<u32>,
    unique: HashMap<Vec<u32>, u32>,
}

impl Masks {
    fn new() -> Self {
        Masks {
            words: Vec::new(),
            unique: HashMap::new(),
        }
    }

    /// The index of `mask`; `dead_end()` is the error when nothing may follow.
    fn add(
        &mut self,
        mask: TextMask,
        dead_end: impl FnOnce() -> ConstraintError,
    ) -> Result<u32, ConstraintError> {
        if !mask.any_text && !mask.accepting {
            return Err(dead_end());
        }
        let next = self.unique.len() as u32;
        let words = &mut self.words;
        let index = *self.unique.entry(mask.bits).or_insert_with_key(|m| {
            words.extend_from_slice(m);
            next
        });
        if self.words.len() > MAX_MASK_WORDS {
            return Err(ConstraintError::TooLarge {
                what: "token masks (bytes)",
                needed: self.words.len() as u64 * 4,
                limit: MAX_MASK_WORDS as u64 * 4,
            });
        }
        Ok(index)
    }
}

fn dead_end(dfa: &ByteDfa, s: u32, after: &str) -> ConstraintError {
    ConstraintError::DeadEnd {
        reason: if dfa.accepting[s as usize] {
            format!(
                "after {after:?} the text can end, but the model has no end-of-generation token"
            )
        } else {
            format!("after {after:?} no token of this vocabulary continues the text")
        },
    }
}

/// The shortest bytes from the start to `target` (for error messages).
fn byte_path(dfa: &ByteDfa, target: u32) -> Vec<u8> {
    let n = dfa.n_states() as usize;
    let mut rep = vec![None; dfa.n_classes as usize];
    for b in 0..=255u8 {
        rep[dfa.classes[b as usize] as usize].get_or_insert(b);
    }
    let mut from: Vec<Option<(u32, u8)>> = vec![None; n];
    let mut queue = std::collections::VecDeque::from([dfa.start]);
    let mut seen = vec![false; n];
    seen[dfa.start as usize] = true;
    while let Some(s) = queue.pop_front() {
        if s == target {
            break;
        }
        for (c, b) in rep.iter().enumerate() {
            let t = dfa.trans[s as usize * dfa.n_classes as usize + c];
            if let (Some(b), false) = (b, seen[t as usize] || t == DEAD) {
                seen[t as usize] = true;
                from[t as usize] = Some((s, *b));
                queue.push_back(t);
            }
        }
    }
    let mut path = Vec::new();
    let mut at = target;
    while let Some((prev, b)) = from[at as usize] {
        path.push(b);
        at = prev;
    }
    path.reverse();
    path
}

/// Classes of DFA states whose token masks must be equal: the same acceptance, and alive after
/// the same byte strings of up to `depth` bytes (a token is allowed exactly when every prefix
/// of its bytes keeps the DFA alive). Moore's partition refinement, `depth` rounds or until
/// stable. Inside a string bounded at 200 characters, every position more than `depth` bytes
/// from the bound falls in one class.
pub fn mask_classes(dfa: &ByteDfa, depth: usize) -> Vec<u32> {
    let n = dfa.n_states() as usize;
    let k = dfa.n_classes as usize;
    let mut class: Vec<u32> = (0..n).map(|s| u32::from(s as u32 != DEAD)).collect();
    let mut count = class.iter().collect::<std::collections::HashSet<_>>().len();
    // Each state's row: its class, then the classes of its successors.
    let mut rows = vec![0u32; n * (k + 1)];
    for _ in 0..depth {
        for (s, row) in rows.chunks_mut(k + 1).enumerate() {
            row[0] = class[s];
            for (r, &t) in row[1..].iter_mut().zip(&dfa.trans[s * k..(s + 1) * k]) {
                *r = class[t as usize];
            }
        }
        let mut ids: HashMap<&[u32], u32> = HashMap::with_capacity(count * 2);
        let next: Vec<u32> = rows
            .chunks(k + 1)
            .map(|row| {
                let fresh = ids.len() as u32;
                *ids.entry(row).or_insert(fresh)
            })
            .collect();
        let stable = ids.len() == count;
        count = ids.len();
        class = next;
        if stable {
            break;
        }
    }
    let mut ids: HashMap<(u32, bool), u32> = HashMap::new();
    (0..n)
        .map(|s| {
            let fresh = ids.len() as u32;
            *ids.entry((class[s], dfa.accepting[s])).or_insert(fresh)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte as a token, plus multi-byte tokens (some across a quote or a digit run).
    fn covering_vocab() -> Arc<VocabBytes> {
        let mut pieces: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for t in [
            "\"", "\":", "\": \"", "ab", "abc", "aaaa", "12", "123", "2024-", "-0", "true", "null",
            "{\"", "\"}", " ", "  ", "é", "ba", "xyz", "0.5",
        ] {
            pieces.push(t.as_bytes().to_vec());
        }
        let refs: Vec<Option<&[u8]>> = pieces.iter().map(|p| Some(p.as_slice())).collect();
        let mut all = refs.clone();
        all.push(None); // an end-of-generation id
        let eog = all.len() as u32 - 1;
        Arc::new(VocabBytes::new(&all, &[eog]))
    }

    /// Bytes without a token of their own ('q', 'é''s two bytes, 0xf5..): reached only inside
    /// multi-byte tokens, or never.
    fn gapped_vocab() -> Arc<VocabBytes> {
        let mut pieces: Vec<Vec<u8>> = (0..=255u8)
            .filter(|&b| b != b'q' && b != 0xc3 && b != 0xa9 && b < 0xf5)
            .map(|b| vec![b])
            .collect();
        for t in ["aq", "qq", "é", "qé", "ab"] {
            pieces.push(t.as_bytes().to_vec());
        }
        let refs: Vec<Option<&[u8]>> = pieces.iter().map(|p| Some(p.as_slice())).collect();
        Arc::new(VocabBytes::new(&refs, &[0]))
    }

    /// The same states reached, each with the same mask.
    fn assert_same_masks(shared: &TokenAutomaton, walked: &TokenAutomaton, pattern: &str) {
        for s in 0..shared.dfa.n_states() {
            let reached = walked.mask_of_state[s as usize] != UNREACHED;
            assert_eq!(
                shared.mask_of_state[s as usize] != UNREACHED,
                reached,
                "{pattern}: state {s}"
            );
            if reached {
                assert_eq!(shared.mask(s), walked.mask(s), "{pattern}: state {s}");
            }
        }
    }

    #[test]
    fn shared_walks_give_every_state_the_mask_of_its_own_walk() {
        for (vocab, pattern) in [
            (gapped_vocab(), "a(q|b)*c?"),
            (gapped_vocab(), "[a-zé]{0,20}!"),
            (gapped_vocab(), "(qé|x)+"),
        ] {
            let dfa = ByteDfa::new(pattern).unwrap();
            let shared = TokenAutomaton::new(dfa.clone(), vocab.clone()).unwrap();
            let walked = TokenAutomaton::by_walks(dfa, vocab).unwrap();
            assert_eq!(
                shared.n_token_states(),
                walked.n_token_states(),
                "{pattern}"
            );
            assert_same_masks(&shared, &walked, pattern);
        }
        let vocab = covering_vocab();
        for pattern in [
            r#""[a-z]{0,40}""#,
            r#"\{"a": "[^"]{2,30}", "n": [0-9]{1,4}\}"#,
            "(ab|ba){3,9}c?",
            "[0-9]{4}-[0-9]{2}-[0-9]{2}",
            "x{0,50}yz",
            "(true|null|[0-9]+(\\.[0-9]+)?)( (true|null|[0-9]+))*",
            // More classes than one batch of shared walks.
            "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2}) to [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,6})?Z",
        ] {
            let dfa = ByteDfa::new(pattern).unwrap();
            if pattern.starts_with("[0-9]{4}-[0-9]{2}-[0-9]{2}T") {
                let classes = mask_classes(&dfa, vocab.longest_token());
                let distinct: std::collections::HashSet<_> = classes.iter().collect();
                assert!(distinct.len() > BATCH, "{} classes", distinct.len());
            }
            let shared = TokenAutomaton::new(dfa.clone(), vocab.clone()).unwrap();
            let walked = TokenAutomaton::by_walks(dfa.clone(), vocab.clone()).unwrap();
            let unsplit =
                TokenAutomaton::by_split_classes(dfa.clone(), vocab.clone(), usize::MAX).unwrap();
            assert!(unsplit.visits <= walked.visits, "{pattern}");
            assert_same_masks(&shared, &walked, pattern);
            // The trie split at every depth: shallow walks plus the longer tokens one by one.
            for split in 0..=vocab.longest_token() {
                let split_masks =
                    TokenAutomaton::by_split_classes(dfa.clone(), vocab.clone(), split).unwrap();
                assert_same_masks(&split_masks, &walked, &format!("{pattern} split {split}"));
            }
        }
        // A bounded string: its positions far from the bound share one walk.
        let dfa = ByteDfa::new(r#""[a-z]{0,200}""#).unwrap();
        let shared = TokenAutomaton::new(dfa.clone(), vocab.clone()).unwrap();
        let walked = TokenAutomaton::by_walks(dfa, vocab).unwrap();
        assert!(
            shared.visits * 10 < walked.visits,
            "{} vs {} trie nodes",
            shared.visits,
            walked.visits
        );
    }

    #[test]
    fn dead_ends_are_found_either_way() {
        // After "a" the pattern needs "\u{1}" then "q"; a vocabulary without 'q' cannot go on.
        let pieces: Vec<Vec<u8>> = (0..=255u8)
            .filter(|&b| b != b'q')
            .map(|b| vec![b])
            .collect();
        let refs: Vec<Option<&[u8]>> = pieces.iter().map(|p| Some(p.as_slice())).collect();
        let vocab = Arc::new(VocabBytes::new(&refs, &[]));
        let e = TokenAutomaton::new(ByteDfa::new("aq").unwrap(), vocab).unwrap_err();
        assert!(e.to_string().contains("after \"a\" no token"), "{e}");
        let bytes: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let refs: Vec<Option<&[u8]>> = bytes.iter().map(|p| Some(p.as_slice())).collect();
        let no_eog = Arc::new(VocabBytes::new(&refs, &[]));
        let e = TokenAutomaton::new(ByteDfa::new("a").unwrap(), no_eog).unwrap_err();
        assert!(
            e.to_string().contains("after \"a\" the text can end"),
            "{e}"
        );
    }
}
