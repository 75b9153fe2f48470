//! Compiled constraints of one model, kept so that a format used again (every turn of a
//! form-filling chat) compiles once: the model's vocabulary bytes (built on first use) and the
//! last [`CACHED`] formats, most recent first.

use super::error::ConstraintError;
use super::format::{Constraint, ResponseFormat};
use super::vocab_bytes::VocabBytes;
use std::collections::VecDeque;
use std::sync::Arc;

/// Formats kept per model.
pub const CACHED: usize = 8;

#[derive(Debug, Default)]
pub struct ConstraintCache {
    vocab: Option<Arc<VocabBytes>>,
    entries: VecDeque<(String, Arc<Constraint>)>,
}

impl ConstraintCache {
    /// Whether `format` is compiled and kept.
    pub fn contains(&self, format: &ResponseFormat) -> bool {
        let key = serde_json::to_string(format).unwrap_or_default();
        self.entries.iter().any(|(k, _)| *k == key)
    }

    /// The compiled `format` (None: free text); `vocab` builds the model's vocabulary bytes
    /// the first time.
    pub fn get(
        &mut self,
        format: &ResponseFormat,
        vocab: impl FnOnce() -> VocabBytes,
    ) -> Result<Option<Arc<Constraint>>, ConstraintError> {
        if *format == ResponseFormat::Text {
            return Ok(None);
        }
        // Serializing a format cannot fail (strings, numbers, JSON values).
        let key = serde_json::to_string(format).unwrap_or_default();
        if let Some(i) = self.entries.iter().position(|(k, _)| *k == key) {
            let entry = self.entries.remove(i).expect("found above");
            let c = entry.1.clone();
            self.entries.push_front(entry);
            return Ok(Some(c));
        }
        let vocab = self.vocab.get_or_insert_with(|| Arc::new(vocab())).clone();
        let Some(c) = format.compile(&vocab)? else {
            return Ok(None);
        };
        let c = Arc::new(c);
        self.entries.push_front((key, c.clone()));
        self.entries.truncate(CACHED);
        Ok(Some(c))
    }

    /// Formats held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
