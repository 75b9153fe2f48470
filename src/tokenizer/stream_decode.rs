//! Incremental detokenization for streaming generation. A byte-level or byte-fallback
//! token can end in the middle of a multi-byte character (an emoji is often split over
//! two or more byte tokens), so bytes are held back until they form complete UTF-8.

use super::codec::Tokenizer;

/// Turns a stream of token ids into text, emitting only complete UTF-8.
///
/// It holds no reference to the [`Tokenizer`] (so it can live next to it in a wasm
/// wrapper); pass the tokenizer to [`StreamDecoder::push`].
#[derive(Clone, Debug, Default)]
pub struct StreamDecoder {
    pending: Vec<u8>,
    render_special: bool,
}

impl StreamDecoder {
    /// `render_special`: whether control tokens (e.g. `<|im_end|>`) appear as their text.
    pub fn new(render_special: bool) -> StreamDecoder {
        StreamDecoder {
            pending: Vec::new(),
            render_special,
        }
    }

    /// Adds one token. Returns the text that became complete, if any. An id outside the
    /// vocabulary adds nothing (documented lossy behaviour: a model whose output layer is
    /// wider than its vocabulary can produce such ids).
    pub fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> Option<String> {
        let piece = tokenizer.token_to_piece(id, self.render_special).ok()?;
        self.push_bytes(piece)
    }

    /// Adds raw bytes; see [`StreamDecoder::push`]. Invalid sequences (bytes that can
    /// never start or continue a character) become U+FFFD right away; only a truncated
    /// character at the end is held back.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> Option<String> {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut pos = 0;
        while pos < self.pending.len() {
            let rest = &self.pending[pos..];
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    pos = self.pending.len();
                }
                Err(e) => {
                    // The prefix up to valid_up_to is valid UTF-8, so this borrows.
                    out.push_str(&String::from_utf8_lossy(&rest[..e.valid_up_to()]));
                    pos += e.valid_up_to();
                    match e.error_len() {
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            pos += bad;
                        }
                        None => break, // incomplete tail: wait for more bytes
                    }
                }
            }
        }
        self.pending.drain(..pos);
        (!out.is_empty()).then_some(out)
    }

    /// Flushes what is held: an incomplete trailing character becomes U+FFFD.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }

    /// Number of bytes held back waiting for the rest of a character (at most 3).
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_split_characters() {
        let mut d = StreamDecoder::new(true);
        let rocket = "🚀".as_bytes();
        assert_eq!(d.push_bytes(&rocket[..1]), None);
        assert_eq!(d.push_bytes(&rocket[1..3]), None);
        assert_eq!(d.pending_len(), 3);
        assert_eq!(d.push_bytes(&[rocket[3], b'!']).as_deref(), Some("🚀!"));
        assert_eq!(d.finish(), "");
    }

    #[test]
    fn invalid_bytes_become_replacement() {
        let mut d = StreamDecoder::new(true);
        assert_eq!(d.push_bytes(b"a\xFFb").as_deref(), Some("a\u{FFFD}b"));
        // A lead byte followed by a non-continuation byte is invalid, not pending.
        assert_eq!(d.push_bytes(b"\xE2x").as_deref(), Some("\u{FFFD}x"));
        assert_eq!(d.push_bytes(b"\xF0\x9F"), None);
        assert_eq!(d.finish(), "\u{FFFD}");
        assert_eq!(d.pending_len(), 0);
    }
}
