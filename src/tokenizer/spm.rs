//! SentencePiece-style BPE ("llama" model), following llama.cpp's `llm_tokenizer_spm`:
//! start from single characters and repeatedly merge the adjacent pair whose joined text
//! is the token with the highest score; characters left without a token fall back to
//! byte tokens `<0xNN>`. Spaces are written as `▁` (U+2581) before merging.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::vocab::Vocab;

/// SentencePiece's visible space.
pub(crate) const SPACE: char = '\u{2581}';

/// Tokenizes one raw-text fragment (spaces already escaped to `▁`), appending to `out`.
pub(crate) fn encode(vocab: &Vocab, text: &str, out: &mut Vec<u32>) {
    let mut syms: Vec<Symbol> = Vec::with_capacity(text.len());
    for (start, c) in text.char_indices() {
        let i = syms.len() as i32;
        syms.push(Symbol {
            start,
            end: start + c.len_utf8(),
            prev: i - 1,
            next: i + 1,
        });
    }
    if let Some(last) = syms.last_mut() {
        last.next = -1;
    }
    let mut queue = BinaryHeap::new();
    for i in 1..syms.len() {
        push_pair(vocab, text, &syms, i - 1, i, &mut queue);
    }
    while let Some(pair) = queue.pop() {
        let (ls, rs) = (syms[pair.left], syms[pair.right]);
        // Stale if either side was merged since (llama.cpp compares the joined length).
        if ls.is_empty()
            || rs.is_empty()
            || rs.end - ls.start != pair.len
            || ls.next != pair.right as i32
        {
            continue;
        }
        syms[pair.left].end = rs.end;
        syms[pair.left].next = rs.next;
        syms[pair.right].start = rs.end;
        if rs.next >= 0 {
            syms[rs.next as usize].prev = pair.left as i32;
        }
        if ls.prev >= 0 {
            push_pair(vocab, text, &syms, ls.prev as usize, pair.left, &mut queue);
        }
        if rs.next >= 0 {
            push_pair(vocab, text, &syms, pair.left, rs.next as usize, &mut queue);
        }
    }
    for s in syms.iter().filter(|s| !s.is_empty()) {
        let piece = &text[s.start..s.end];
        match vocab.id(piece) {
            Some(id) => out.push(id),
            None => out.extend(piece.bytes().filter_map(|b| byte_token(vocab, b))),
        }
    }
}

/// llama.cpp's `byte_to_token`: `<0xNN>`, else the byte as a one-char token; we fall
/// back to UNK (llama.cpp would throw) and drop the byte if there is none.
pub(crate) fn byte_token(vocab: &Vocab, b: u8) -> Option<u32> {
    vocab
        .id(&format!("<0x{b:02X}>"))
        .or_else(|| {
            if b.is_ascii() {
                vocab.id(char::from(b).encode_utf8(&mut [0; 4]))
            } else {
                None
            }
        })
        .or(vocab.unk)
}

fn push_pair(
    vocab: &Vocab,
    text: &str,
    syms: &[Symbol],
    left: usize,
    right: usize,
    queue: &mut BinaryHeap<Pair>,
) {
    let (start, end) = (syms[left].start, syms[right].end);
    if let Some(id) = vocab.id(&text[start..end]) {
        let score = vocab.scores.get(id as usize).copied().unwrap_or(0.0);
        queue.push(Pair {
            score,
            left,
            right,
            len: end - start,
        });
    }
}

#[derive(Clone, Copy, Debug)]
struct Symbol {
    start: usize,
    end: usize,
    prev: i32,
    next: i32,
}

impl Symbol {
    fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// Candidate merge; the heap pops the highest score, ties to the leftmost pair.
#[derive(Clone, Copy, Debug)]
struct Pair {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl Ord for Pair {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}
impl PartialOrd for Pair {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Pair {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Pair {}
