//! A regular expression → a byte-level DFA in the compact form the GPU walks: states numbered
//! from 0 (0 is the dead state), bytes mapped to equivalence classes, a dense transition table
//! `trans[state * n_classes + class]`, and whether the bytes read so far are a whole match.
//! Built with regex-automata's determinizer (with its size limits), then renumbered by a
//! breadth-first walk from the start state so only reachable states are kept.

use super::error::ConstraintError;
use super::perl_classes::ascii_perl_classes;
use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::util::{primitives::StateID, start, syntax};
use regex_automata::{Anchored, MatchKind};
use std::collections::HashMap;

/// The dead state: no continuation matches.
pub const DEAD: u32 = 0;
/// Most DFA states a constraint may have.
pub const MAX_STATES: usize = 1 << 16;
/// regex-automata's limits: the DFA's own bytes, and the determinizer's working memory.
const DFA_BYTES: usize = 64 << 20;
const DETERMINIZE_BYTES: usize = 128 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByteDfa {
    /// Byte → class.
    pub classes: [u8; 256],
    pub n_classes: u32,
    /// `[state * n_classes + class]` → next state.
    pub trans: Vec<u32>,
    /// Whether the bytes that led to a state are a whole match.
    pub accepting: Vec<bool>,
    pub start: u32,
}

impl ByteDfa {
    /// The DFA of `pattern` matched against the whole input (anchored at both ends); `\d`,
    /// `\w`, `\s` mean what they mean in JavaScript (`perl_classes`).
    pub fn new(pattern: &str) -> Result<Self, ConstraintError> {
        let pattern = ascii_perl_classes(pattern)?;
        let dfa = dense::Builder::new()
            .syntax(syntax::Config::new().unicode(true).utf8(true))
            .configure(
                dense::Config::new()
                    .start_kind(StartKind::Anchored)
                    .match_kind(MatchKind::All)
                    .byte_classes(true)
                    .dfa_size_limit(Some(DFA_BYTES))
                    .determinize_size_limit(Some(DETERMINIZE_BYTES)),
            )
            // `$`: no match before the end of the text, so no state is live only because it
            // remembers a match that ended a byte earlier (regex-automata's delayed matches).
            .build(&format!("(?:{pattern})$"))
            .map_err(|e| {
                if e.is_size_limit_exceeded() {
                    ConstraintError::TooLarge {
                        what: "DFA (bytes)",
                        needed: DFA_BYTES as u64 + 1,
                        limit: DFA_BYTES as u64,
                    }
                } else {
                    ConstraintError::InvalidRegex(e.to_string())
                }
            })?;
        let start_id = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| ConstraintError::InvalidRegex(e.to_string()))?;
        // Classes: the byte classes regex-automata found, renumbered densely.
        let mut classes = [0u8; 256];
        let mut reps: Vec<u8> = Vec::new();
        let bc = dfa.byte_classes();
        let mut class_of: HashMap<u8, u8> = HashMap::new();
        for b in 0..=255u8 {
            let c = bc.get(b);
            let next = class_of.len() as u8;
            let dense_class = *class_of.entry(c).or_insert_with(|| {
                reps.push(b);
                next
            });
            classes[b as usize] = dense_class;
        }
        let n_classes = reps.len() as u32;
        let mut ids: HashMap<StateID, u32> = HashMap::new();
        let mut order: Vec<StateID> = Vec::new();
        let number = |s: StateID,
                      ids: &mut HashMap<StateID, u32>,
                      order: &mut Vec<StateID>|
         -> Result<u32, ConstraintError> {
            if dfa.is_dead_state(s) {
                return Ok(DEAD);
            }
            if let Some(&i) = ids.get(&s) {
                return Ok(i);
            }
            let i = order.len() as u32 + 1;
            if i as usize >= MAX_STATES {
                return Err(ConstraintError::TooLarge {
                    what: "DFA states",
                    needed: i as u64 + 1,
                    limit: MAX_STATES as u64,
                });
            }
            ids.insert(s, i);
            order.push(s);
            Ok(i)
        };
        let start = number(start_id, &mut ids, &mut order)?;
        // Row 0: the dead state loops on itself.
        let mut trans = vec![DEAD; n_classes as usize];
        let mut accepting = vec![false];
        let mut at = 0;
        while at < order.len() {
            let s = order[at];
            at += 1;
            accepting.push(dfa.is_match_state(dfa.next_eoi_state(s)));
            for &b in &reps {
                let t = dfa.next_state(s, b);
                if dfa.is_quit_state(t) {
                    return Err(ConstraintError::InvalidRegex(format!(
                        "the DFA gave up on byte {b:#04x} (a Unicode word boundary?)"
                    )));
                }
                trans.push(number(t, &mut ids, &mut order)?);
            }
        }
        Ok(Self {
            classes,
            n_classes,
            trans,
            accepting,
            start,
        })
    }

    pub fn n_states(&self) -> u32 {
        self.accepting.len() as u32
    }

    pub fn next(&self, state: u32, byte: u8) -> u32 {
        self.trans[(state * self.n_classes) as usize + self.classes[byte as usize] as usize]
    }

    /// The state after `bytes` from `state` (DEAD once no continuation can match).
    pub fn walk(&self, mut state: u32, bytes: &[u8]) -> u32 {
        for &b in bytes {
            state = self.next(state, b);
        }
        state
    }

    /// Whether the whole of `text` matches.
    pub fn matches(&self, text: &[u8]) -> bool {
        self.accepting[self.walk(self.start, text) as usize]
    }
}

/// A compiled regex matched against whole texts, as constraints match (tests of the regex
/// writers).
#[cfg(test)]
pub(crate) struct FullMatch(ByteDfa);

#[cfg(test)]
impl FullMatch {
    pub(crate) fn new(re: &str) -> FullMatch {
        FullMatch(ByteDfa::new(re).unwrap_or_else(|e| panic!("{re}: {e}")))
    }

    pub(crate) fn is_match(&self, text: &str) -> bool {
        self.0.matches(text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_matches_only() {
        let d = ByteDfa::new("a(b|bc)d*|é").unwrap();
        for (t, m) in [
            ("ab", true),
            ("abc", true),
            ("abcdd", true),
            ("a", false),
            ("abx", false),
            ("é", true),
            ("", false),
        ] {
            assert_eq!(d.matches(t.as_bytes()), m, "{t}");
        }
        // Byte by byte through a two-byte character.
        let mid = d.next(d.start, "é".as_bytes()[0]);
        assert_ne!(mid, DEAD);
        assert!(!d.accepting[mid as usize]);
        assert_eq!(d.walk(d.start, b"x"), DEAD);
    }

    #[test]
    fn huge_patterns_are_size_errors() {
        // The textbook exponential DFA: 2^17 states.
        match ByteDfa::new("[ab]*a[ab]{16}") {
            Err(ConstraintError::TooLarge { .. }) => {}
            other => panic!("{:?}", other.map(|d| d.n_states())),
        }
        assert!(matches!(
            ByteDfa::new("(unclosed"),
            Err(ConstraintError::InvalidRegex(_))
        ));
    }
}
