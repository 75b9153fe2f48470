//! Stop sequences: strings that end a generation and are never emitted, even when they arrive
//! split across several tokens.
//!
//! Text is held back while its tail could still be the start of a stop string; once it cannot,
//! it is released. When a stop string completes, the text before it is released and the rest is
//! dropped. So a caller streaming the released text never sees any part of a stop string, and
//! holds back at most `longest stop string - 1` bytes.

/// Streaming stop-string filter. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct StopText {
    stops: Vec<String>,
    pending: String,
    hit: bool,
}

impl StopText {
    /// Empty strings are ignored (they would stop before the first character).
    pub fn new(stops: &[String]) -> Self {
        Self {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            pending: String::new(),
            hit: false,
        }
    }

    /// Whether a stop string has completed.
    pub fn hit(&self) -> bool {
        self.hit
    }

    /// Takes the next decoded text; returns what may be emitted now.
    pub fn push(&mut self, piece: &str) -> String {
        if self.hit {
            return String::new();
        }
        if self.stops.is_empty() {
            return piece.to_string();
        }
        self.pending.push_str(piece);
        let first = self
            .stops
            .iter()
            .filter_map(|s| self.pending.find(s.as_str()))
            .min();
        if let Some(at) = first {
            self.hit = true;
            let out = self.pending[..at].to_string();
            self.pending.clear();
            return out;
        }
        // Keep the longest tail that is a proper prefix of some stop string.
        let keep = self
            .stops
            .iter()
            .map(|s| longest_tail_prefix(&self.pending, s))
            .max()
            .unwrap_or(0);
        let cut = self.pending.len() - keep;
        let out = self.pending[..cut].to_string();
        self.pending.drain(..cut);
        out
    }

    /// The end of the generation without a stop string: everything held back.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of `stop` (on char boundaries).
fn longest_tail_prefix(text: &str, stop: &str) -> usize {
    let max = (stop.len() - 1).min(text.len());
    (1..=max)
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n) && stop.starts_with(&text[text.len() - n..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::StopText;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut f = StopText::new(&stops);
        let mut out = String::new();
        for p in pieces {
            out += &f.push(p);
            if f.hit() {
                return (out, true);
            }
        }
        out += &f.finish();
        (out, false)
    }

    #[test]
    fn stop_split_across_pieces_is_never_emitted() {
        assert_eq!(
            run(&["</end>"], &["ab</", "en", "d>tail"]),
            ("ab".into(), true)
        );
        assert_eq!(run(&["\n\n"], &["a\n", "\nb"]), ("a".into(), true));
        // A near miss is released in full.
        assert_eq!(
            run(&["</end>"], &["ab</", "en", "x"]),
            ("ab</enx".into(), false)
        );
        assert_eq!(run(&["stop"], &["st"]), ("st".into(), false));
    }

    #[test]
    fn the_earliest_stop_wins_and_nothing_leaks_before_it() {
        // "abcd" starts before "bc" in "xabcd".
        assert_eq!(run(&["bc", "abcd"], &["xab", "cd"]), ("x".into(), true));
        assert_eq!(run(&["bc", "abcd"], &["xab", "cx"]), ("xa".into(), true));
        let stops = vec!["END".to_string()];
        let mut f = StopText::new(&stops);
        // Released text never contains a prefix of the stop at its end.
        assert_eq!(f.push("helloE"), "hello");
        assert_eq!(f.push("N"), "");
        assert_eq!(f.push("x"), "ENx");
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        assert_eq!(run(&["é!"], &["caf", "é", "!"]), ("caf".into(), true));
        assert_eq!(run(&["éa"], &["xé", "é", "b"]), ("xééb".into(), false));
        assert_eq!(run(&[""], &["a"]), ("a".into(), false));
    }
}
