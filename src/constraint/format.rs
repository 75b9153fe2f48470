//! The response formats a generation may ask for, and their compilation over a vocabulary.

use super::byte_dfa::ByteDfa;
use super::error::ConstraintError;
use super::gbnf::gbnf_regex;
use super::json_schema::{any_object_regex, schema_regex};
use super::token_automaton::TokenAutomaton;
use super::vocab_bytes::VocabBytes;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Nesting of arrays and objects (and recursive `$ref`s) unrolled when none is given.
pub const DEFAULT_MAX_DEPTH: u32 = 5;
/// Times a grammar's recursive rule may appear inside itself when no `maxDepth` is given:
/// lower than [`DEFAULT_MAX_DEPTH`] because a grammar's author writes its own blanks and
/// alternatives (llama.cpp's JSON grammar has 39,027 DFA states at 3 and passes the pattern
/// limit at 4).
pub const DEFAULT_GRAMMAR_DEPTH: u32 = 3;
/// The deepest nesting a format may ask for.
pub const MAX_DEPTH: u32 = 12;

/// What the generated text must be. In TypeScript:
/// `{ type: "json_schema", schema, maxDepth?, orText? } | { type: "json_object", maxDepth? } |
/// { type: "regex", pattern } | { type: "grammar", grammar, maxDepth? } | { type: "text" }`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub enum ResponseFormat {
    /// Free text: no constraint.
    Text,
    /// JSON valid under `schema` (README.md, "Structured output", lists the keywords).
    #[serde(rename_all = "camelCase")]
    JsonSchema {
        #[cfg_attr(target_arch = "wasm32", tsify(type = "JsonSchema"))]
        schema: serde_json::Value,
        /// Nesting levels unrolled for recursive schemas (default 5, at most 12).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(target_arch = "wasm32", tsify(optional))]
        max_depth: Option<u32>,
        /// Also allow free text whose first non-blank character is neither `{` nor `[` (the
        /// model chooses: a tool call, or an answer in words); the JSON may then follow up to 4
        /// spaces or newlines. Default: false.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(target_arch = "wasm32", tsify(optional))]
        or_text: Option<bool>,
    },
    /// Any JSON object.
    #[serde(rename_all = "camelCase")]
    JsonObject {
        /// Nesting levels of arrays and objects (default 5, at most 12).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(target_arch = "wasm32", tsify(optional))]
        max_depth: Option<u32>,
    },
    /// Text the whole regular expression matches (Rust `regex` syntax).
    Regex { pattern: String },
    /// Text the `root` rule of a GBNF grammar (llama.cpp's format) matches. Rules that refer
    /// to themselves are unrolled: a rule may appear again inside itself `maxDepth` times.
    #[serde(rename_all = "camelCase")]
    Grammar {
        grammar: String,
        /// Times a recursive rule may appear inside itself (default 3, at most 12).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(target_arch = "wasm32", tsify(optional))]
        max_depth: Option<u32>,
    },
}

impl ResponseFormat {
    /// The regular expression the output must match; None for free text.
    pub fn regex(&self) -> Result<Option<String>, ConstraintError> {
        let depth_or = |d: &Option<u32>, default: u32| -> Result<u32, ConstraintError> {
            match d.unwrap_or(default) {
                d @ 1..=MAX_DEPTH => Ok(d),
                d => Err(ConstraintError::InvalidOption {
                    option: "maxDepth",
                    rule: format!("must be an integer in 1..={MAX_DEPTH}, got {d}"),
                }),
            }
        };
        let depth = |d: &Option<u32>| depth_or(d, DEFAULT_MAX_DEPTH);
        Ok(match self {
            ResponseFormat::Text => None,
            ResponseFormat::JsonSchema {
                schema,
                max_depth,
                or_text,
            } => {
                let json = schema_regex(schema, depth(max_depth)?)?;
                Some(if or_text.unwrap_or(false) {
                    // Up to 4 spaces or newlines, then the JSON or words that start with
                    // neither `{` nor `[`.
                    format!(r"(?:[ \n]{{0,4}}{json}|(?:[ \n]{{0,4}}[^\s\[{{](?s:.)*)?)")
                } else {
                    json
                })
            }
            ResponseFormat::JsonObject { max_depth } => Some(any_object_regex(depth(max_depth)?)),
            ResponseFormat::Regex { pattern } => Some(pattern.clone()),
            ResponseFormat::Grammar { grammar, max_depth } => Some(gbnf_regex(
                grammar,
                depth_or(max_depth, DEFAULT_GRAMMAR_DEPTH)?,
            )?),
        })
    }

    /// The compiled constraint over `vocab`; None for free text.
    pub fn compile(&self, vocab: &Arc<VocabBytes>) -> Result<Option<Constraint>, ConstraintError> {
        let Some(regex) = self.regex()? else {
            return Ok(None);
        };
        let dfa = ByteDfa::new(&regex)?;
        Ok(Some(Constraint {
            automaton: TokenAutomaton::new(dfa, vocab.clone())?,
        }))
    }
}

/// A compiled constraint: the token automaton (the CPU reference) whose tables the GPU uses.
#[derive(Debug)]
pub struct Constraint {
    pub automaton: TokenAutomaton,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn or_text_allows_words_or_the_json_but_not_other_json() {
        let call = serde_json::json!({
            "type": "object",
            "properties": {"name": {"const": "f"}, "arguments": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
            "required": ["name", "arguments"],
            "additionalProperties": false
        });
        let format = ResponseFormat::JsonSchema {
            schema: call,
            max_depth: None,
            or_text: Some(true),
        };
        let dfa = ByteDfa::new(&format.regex().unwrap().unwrap()).unwrap();
        for ok in [
            "",
            "It is sunny.",
            "Hi {there}",
            r#"{"name":"f","arguments":{"x":3}}"#,
        ] {
            assert!(dfa.matches(ok.as_bytes()), "{ok}");
        }
        for bad in [r#"{"name":"g","arguments":{}}"#, "[1]", "{"] {
            assert!(!dfa.matches(bad.as_bytes()), "{bad}");
        }
    }
}
