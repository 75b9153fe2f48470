//! Response formats the constraint tests share.

use fuselm::constraint::ResponseFormat;
use serde_json::{json, Value};

pub fn schema(v: Value) -> ResponseFormat {
    ResponseFormat::JsonSchema {
        schema: v,
        max_depth: None,
        or_text: None,
    }
}

/// A small, typical extraction schema.
pub fn person() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "role": {"enum": ["admin", "user", "guest"]},
            "active": {"type": "boolean"}
        },
        "required": ["name", "age", "role"],
        "additionalProperties": false
    })
}
