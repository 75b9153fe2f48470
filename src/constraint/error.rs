//! Why a constraint could not be compiled.

use thiserror::Error;

#[derive(Debug, Clone, Error, PartialEq)]
pub enum ConstraintError {
    /// A JSON Schema keyword outside the supported subset.
    #[error("unsupported JSON Schema keyword {keyword:?} at {path}")]
    UnsupportedKeyword { keyword: String, path: String },
    /// A schema that is not valid JSON Schema, or uses a keyword in an unsupported way.
    #[error("JSON Schema at {path}: {reason}")]
    InvalidSchema { path: String, reason: String },
    /// An option of the format out of its range.
    #[error("{option} {rule}")]
    InvalidOption { option: &'static str, rule: String },
    /// The regular expression does not parse (or uses an unsupported feature).
    #[error("regular expression: {0}")]
    InvalidRegex(String),
    /// A GBNF grammar that does not parse, or refers to a rule it never defines.
    #[error("grammar, line {line}, column {column}: {reason}")]
    InvalidGrammar {
        line: usize,
        column: usize,
        reason: String,
    },
    /// Nothing valid fits in the nesting allowed.
    #[error("nothing valid fits in maxDepth {max_depth} levels of nesting (of the schema or the grammar's recursive rules)")]
    TooDeep { max_depth: u32 },
    /// Compiling would exceed one of the stated bounds.
    #[error("{what}: needed {needed}, limit {limit}")]
    TooLarge {
        what: &'static str,
        needed: u64,
        limit: u64,
    },
    /// Somewhere the constraint can reach, the model's tokens cannot go on.
    #[error("the constraint cannot be followed with this model's vocabulary: {reason}")]
    DeadEnd { reason: String },
}
