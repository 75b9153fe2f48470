//! Constrained generation: a response format (JSON Schema, any JSON object, a regular
//! expression, a GBNF grammar) compiled to a token-level automaton that the GPU evaluates inside the fused
//! pass, with no host round trip per token (ARCHITECTURE.md, "Constraints").
//!
//! format → regex (`json_schema`, `gbnf`) → byte DFA (`byte_dfa`) → a mask per reachable state over
//! the model's tokens (`token_automaton`, with `vocab_bytes`). The GPU form of the tables is
//! `kernels::constraint`.

mod byte_dfa;
mod cache;
mod error;
mod format;
mod gbnf;
mod json_pattern;
mod json_schema;
mod numeric_range;
mod perl_classes;
mod token_automaton;
mod trie_walk;
mod vocab_bytes;

pub use byte_dfa::{ByteDfa, DEAD};
pub use cache::ConstraintCache;
pub use error::ConstraintError;
pub use format::{Constraint, ResponseFormat, DEFAULT_GRAMMAR_DEPTH, DEFAULT_MAX_DEPTH, MAX_DEPTH};
pub use gbnf::gbnf_regex;
pub use json_schema::{any_object_regex, schema_regex};
pub use numeric_range::{integer_range, number_range};
pub use token_automaton::{TokenAutomaton, MAX_MASK_WORDS};
pub use trie_walk::MAX_VISITS;
pub use vocab_bytes::VocabBytes;
