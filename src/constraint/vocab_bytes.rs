//! A model's vocabulary as constraints see it: each token's bytes (what the text grows by when
//! it is generated), which tokens may appear in constrained text at all (text tokens with
//! bytes; control, unknown and unused ones never), the end-of-generation ids, and a byte trie
//! over the text tokens for compiling masks. Built once per model.

use crate::tokenizer::{TokenKind, Tokenizer};

#[derive(Debug)]
pub struct VocabBytes {
    pub n_vocab: u32,
    /// Token id → its bytes: `bytes[offsets[id]..offsets[id + 1]]` (empty for non-text ids).
    pub offsets: Vec<u32>,
    pub bytes: Vec<u8>,
    /// End-of-generation ids (allowed exactly where the constraint is satisfied).
    pub eog: Vec<u32>,
    pub(super) trie: Trie,
}

/// The text tokens' bytes as a trie: node 0 is the root; `children(n)` are (byte, node) sorted
/// by byte; `ends(n)` the ids whose bytes end at n.
#[derive(Debug, Default)]
pub(super) struct Trie {
    child_start: Vec<u32>,
    child_byte: Vec<u8>,
    child_node: Vec<u32>,
    end_start: Vec<u32>,
    end_ids: Vec<u32>,
}

impl Trie {
    pub fn children(&self, n: u32) -> impl Iterator<Item = (u8, u32)> + '_ {
        let (a, b) = (
            self.child_start[n as usize] as usize,
            self.child_start[n as usize + 1] as usize,
        );
        self.child_byte[a..b]
            .iter()
            .copied()
            .zip(self.child_node[a..b].iter().copied())
    }

    pub fn ends(&self, n: u32) -> &[u32] {
        &self.end_ids[self.end_start[n as usize] as usize..self.end_start[n as usize + 1] as usize]
    }

    /// Each node's depth, and the length of the longest token in its subtree (0: none).
    pub fn depths_and_longest(&self) -> (Vec<u32>, Vec<u32>) {
        let n = self.child_start.len().saturating_sub(1);
        let mut depth = vec![0u32; n];
        // Nodes are numbered depth-first: a parent comes before its children.
        for node in 0..n {
            for (_, child) in self.children(node as u32) {
                depth[child as usize] = depth[node] + 1;
            }
        }
        let mut longest = vec![0u32; n];
        for node in (0..n).rev() {
            let own = if self.ends(node as u32).is_empty() {
                0
            } else {
                depth[node]
            };
            longest[node] = self
                .children(node as u32)
                .map(|(_, c)| longest[c as usize])
                .fold(own, u32::max);
        }
        (depth, longest)
    }

    /// Which bytes are a token of their own.
    pub fn single_byte_tokens(&self) -> [bool; 256] {
        let mut seen = [false; 256];
        for (b, child) in self.children(0) {
            seen[b as usize] |= !self.ends(child).is_empty();
        }
        seen
    }

    /// From `(id, bytes)` pairs (bytes non-empty).
    fn build(tokens: &[(u32, &[u8])]) -> Self {
        // Sorted by bytes, the tokens sharing a prefix are consecutive: a stack of open nodes
        // builds the trie in one pass, numbering nodes depth-first.
        let mut sorted: Vec<(u32, &[u8])> = tokens.to_vec();
        sorted.sort_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(&b.0)));
        let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
        let mut ends: Vec<Vec<u32>> = vec![Vec::new()];
        let mut path: Vec<u32> = vec![0]; // path[d] = node at depth d of the previous token
        let mut prev: &[u8] = &[];
        for &(id, bytes) in &sorted {
            let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            path.truncate(common + 1);
            for &b in &bytes[common..] {
                let node = children.len() as u32;
                children.push(Vec::new());
                ends.push(Vec::new());
                let parent = *path.last().unwrap_or(&0);
                children[parent as usize].push((b, node));
                path.push(node);
            }
            ends[*path.last().unwrap_or(&0) as usize].push(id);
            prev = bytes;
        }
        let mut t = Trie::default();
        for (c, e) in children.iter().zip(&ends) {
            t.child_start.push(t.child_byte.len() as u32);
            for &(b, n) in c {
                t.child_byte.push(b);
                t.child_node.push(n);
            }
            t.end_start.push(t.end_ids.len() as u32);
            t.end_ids.extend_from_slice(e);
        }
        t.child_start.push(t.child_byte.len() as u32);
        t.end_start.push(t.end_ids.len() as u32);
        t
    }
}

impl VocabBytes {
    /// `pieces[id]`: the bytes of a text token, None for ids that never appear in constrained
    /// text. `eog`: the ids that end a generation.
    pub fn new(pieces: &[Option<&[u8]>], eog: &[u32]) -> Self {
        let mut offsets = Vec::with_capacity(pieces.len() + 1);
        let mut bytes = Vec::new();
        let mut text: Vec<(u32, &[u8])> = Vec::new();
        for (id, p) in pieces.iter().enumerate() {
            offsets.push(bytes.len() as u32);
            let is_eog = eog.contains(&(id as u32));
            if let Some(p) = p.filter(|p| !p.is_empty() && !is_eog) {
                bytes.extend_from_slice(p);
                text.push((id as u32, p));
            }
        }
        offsets.push(bytes.len() as u32);
        let trie = Trie::build(&text);
        Self {
            n_vocab: pieces.len() as u32,
            offsets,
            bytes,
            eog: eog.to_vec(),
            trie,
        }
    }

    /// The vocabulary of `tokenizer` with the sampler's stop ids as its end-of-generation ids.
    pub fn from_tokenizer(tokenizer: &Tokenizer, stop_ids: &[u32]) -> Self {
        let n = tokenizer.vocab_size() as u32;
        let pieces: Vec<Option<&[u8]>> = (0..n)
            .map(|id| {
                let text = matches!(
                    tokenizer.token_kind(id),
                    Some(TokenKind::Normal | TokenKind::Byte | TokenKind::UserDefined)
                );
                text.then(|| tokenizer.token_to_piece(id, false).ok())
                    .flatten()
            })
            .collect();
        Self::new(&pieces, stop_ids)
    }

    /// The longest text token, in bytes.
    pub fn longest_token(&self) -> usize {
        self.offsets
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
    }

    pub fn token(&self, id: u32) -> &[u8] {
        let i = id as usize;
        match (self.offsets.get(i), self.offsets.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.bytes[a as usize..b as usize],
            _ => &[],
        }
    }

    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    /// Mask words per state: one bit per id.
    pub fn words(&self) -> u32 {
        self.n_vocab.div_ceil(32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trie_holds_every_text_token_once() {
        let pieces: Vec<Option<&[u8]>> = vec![
            Some(b"ab"),
            Some(b"a"),
            None,
            Some(b"abc"),
            Some(b"b"),
            Some(b""),
            Some(b"ab"),
            Some(b"</s>"),
        ];
        let v = VocabBytes::new(&pieces, &[7]);
        let mut found = Vec::new();
        let mut stack = vec![(0u32, Vec::new())];
        while let Some((n, prefix)) = stack.pop() {
            for &id in v.trie.ends(n) {
                found.push((id, prefix.clone()));
            }
            for (b, c) in v.trie.children(n) {
                let mut p = prefix.clone();
                p.push(b);
                stack.push((c, p));
            }
        }
        found.sort();
        let want: Vec<(u32, Vec<u8>)> = vec![
            (0, b"ab".to_vec()),
            (1, b"a".to_vec()),
            (3, b"abc".to_vec()),
            (4, b"b".to_vec()),
            (6, b"ab".to_vec()),
        ];
        assert_eq!(found, want);
        assert_eq!(v.token(3), b"abc");
        assert_eq!(v.token(7), b"", "an end-of-generation id has no text");
        assert_eq!(v.words(), 1);
    }
}
