//! JSON Schema → a regular expression whose every match is a JSON text valid under the
//! schema (the subset README.md's "Structured output" lists). Objects are written with their
//! properties in the schema's order, `[ ]?` between tokens; recursion (`$ref` cycles, any
//! JSON) is unrolled to `max_depth` levels: a branch that would need more is left out (an
//! optional property, an empty array, another `anyOf` member), and a schema with nothing left
//! is an error. Keywords outside the subset are errors naming the keyword and where it is.

use super::error::ConstraintError;
use super::json_pattern::string_pattern;
use super::numeric_range::{integer_range, number_range};
use serde_json::{Map, Value};

/// Whitespace allowed between JSON tokens.
const WS: &str = "[ ]?";
/// One character of a JSON string (escapes included; no raw control characters).
/// `\uXXXX` escapes: no lone surrogate; a surrogate pair is one character.
const STRING_CHAR: &str = r#"(?:[^"\\\x00-\x1F\x7F]|\\["\\/bfnrt]|\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})"#;
const INTEGER: &str = "-?(?:0|[1-9][0-9]*)";
const FRACTION: &str = r"(?:\.[0-9]+)?";
const EXPONENT: &str = "(?:[eE][+-]?[0-9]+)?";
/// Valid days of each month (February to the 28th: a leap day is valid only in leap years).
const DATE: &str = "[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))";
const TIME: &str = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
/// A dot-atom local part and DNS labels that neither start nor end with `-`.
const EMAIL: &str = r"[A-Za-z0-9_%+-]{1,32}(?:\.[A-Za-z0-9_%+-]{1,32}){0,3}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?\.){1,4}[A-Za-z]{2,24}";
const UUID: &str = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";

/// Keywords that only annotate (they never change what is valid).
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];
/// Keywords this compiler understands.
const HANDLED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
];
/// The largest `maxItems` / `maxLength` written out as a bounded repetition.
pub const MAX_REPEAT: u64 = 256;

/// The regular expression for JSON valid under `schema`, recursion unrolled to `max_depth`.
pub fn schema_regex(schema: &Value, max_depth: u32) -> Result<String, ConstraintError> {
    let compiler = Compiler {
        root: schema,
        refs: std::cell::Cell::new(0),
    };
    compiler
        .value(schema, "#", max_depth)?
        .ok_or(ConstraintError::TooDeep { max_depth })
}

/// Any JSON object, arrays and objects nesting at most `max_depth` levels (≥ 1).
pub fn any_object_regex(max_depth: u32) -> String {
    object_of(&any_value(max_depth.max(1) - 1))
}

/// Any JSON value nesting at most `depth` levels of arrays and objects.
fn any_value(depth: u32) -> String {
    let scalar = format!(r#""{STRING_CHAR}*"|{INTEGER}{FRACTION}{EXPONENT}|true|false|null"#);
    if depth == 0 {
        return format!("(?:{scalar})");
    }
    let inner = any_value(depth - 1);
    format!(
        "(?:{scalar}|{}|{})",
        object_of(&inner),
        array_of(&inner, 0, None)
    )
}

fn object_of(value: &str) -> String {
    let member = format!(r#""{STRING_CHAR}*"{WS}:{WS}{value}"#);
    format!(r"\{{{WS}(?:{member}(?:{WS},{WS}{member})*)?{WS}\}}")
}

/// `[` items `]` with `min..=max` items (`max` None: unbounded).
fn array_of(item: &str, min: u64, max: Option<u64>) -> String {
    let more = |lo: u64| match max {
        Some(m) => format!("{{{lo},{}}}", m.saturating_sub(1)),
        None => format!("{{{lo},}}"),
    };
    let rest = format!("(?:{WS},{WS}{item})");
    if min == 0 {
        if max == Some(0) {
            return format!(r"\[{WS}\]");
        }
        format!(r"\[{WS}(?:{item}{rest}{})?{WS}\]", more(0))
    } else {
        format!(r"\[{WS}{item}{rest}{}{WS}\]", more(min - 1))
    }
}

/// A JSON value (string, number, …) as a regex literal.
fn literal(v: &Value) -> String {
    regex_syntax::escape(&v.to_string())
}

struct Compiler<'a> {
    root: &'a Value,
    /// `$ref`s being expanded on the current path (a cycle with no nesting in between would
    /// otherwise never end).
    refs: std::cell::Cell<u32>,
}

/// `$ref`s expanded inside one another at most.
const MAX_REF_CHAIN: u32 = 64;
/// The longest regex a schema may compile to (bytes); exponential sharing of `$defs` stops here.
pub const MAX_REGEX_BYTES: usize = 1 << 20;

fn unsupported(keyword: &str, path: &str) -> ConstraintError {
    ConstraintError::UnsupportedKeyword {
        keyword: keyword.to_string(),
        path: path.to_string(),
    }
}

fn invalid(path: &str, why: impl Into<String>) -> ConstraintError {
    ConstraintError::InvalidSchema {
        path: path.to_string(),
        reason: why.into(),
    }
}

fn count(map: &Map<String, Value>, key: &str, path: &str) -> Result<Option<u64>, ConstraintError> {
    match map.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| invalid(&format!("{path}/{key}"), "must be a non-negative integer")),
    }
}

/// An integer bound: `minimum`/`maximum` (and their exclusive forms) rounded inward.
fn int_bound(
    map: &Map<String, Value>,
    path: &str,
    key: &str,
    exclusive: &str,
    lower: bool,
) -> Result<Option<i64>, ConstraintError> {
    let mut bound: Option<i64> = None;
    for (k, strict) in [(key, false), (exclusive, true)] {
        let Some(v) = map.get(k) else { continue };
        let x = v
            .as_f64()
            .ok_or_else(|| invalid(&format!("{path}/{k}"), "must be a number"))?;
        if !x.is_finite() || x.abs() > 1e17 {
            return Err(invalid(&format!("{path}/{k}"), "must be within ±1e17"));
        }
        let b = match (lower, strict) {
            (true, false) => x.ceil() as i64,
            (true, true) => x.floor() as i64 + 1,
            (false, false) => x.floor() as i64,
            (false, true) => x.ceil() as i64 - 1,
        };
        bound = Some(match bound {
            Some(old) if lower => old.max(b),
            Some(old) => old.min(b),
            None => b,
        });
    }
    Ok(bound)
}

/// A number bound for `type: number`: only integral values are supported.
fn number_bound(
    map: &Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<Option<i64>, ConstraintError> {
    let Some(v) = map.get(key) else {
        return Ok(None);
    };
    let x = v
        .as_f64()
        .ok_or_else(|| invalid(&format!("{path}/{key}"), "must be a number"))?;
    if x.fract() != 0.0 || x.abs() > 1e17 {
        return Err(invalid(
            &format!("{path}/{key}"),
            "for type number, only integral bounds within ±1e17 are supported",
        ));
    }
    Ok(Some(x as i64))
}

impl Compiler<'_> {
    /// The regex of `schema` with `depth` levels of nesting left; None when nothing valid fits.
    fn value(
        &self,
        schema: &Value,
        path: &str,
        depth: u32,
    ) -> Result<Option<String>, ConstraintError> {
        let out = self.value_unchecked(schema, path, depth)?;
        if out.as_ref().is_some_and(|r| r.len() > MAX_REGEX_BYTES) {
            return Err(ConstraintError::TooLarge {
                what: "regular expression (bytes)",
                needed: out.map_or(0, |r| r.len()) as u64,
                limit: MAX_REGEX_BYTES as u64,
            });
        }
        Ok(out)
    }

    fn value_unchecked(
        &self,
        schema: &Value,
        path: &str,
        depth: u32,
    ) -> Result<Option<String>, ConstraintError> {
        let map = match schema {
            Value::Bool(true) => return Ok(Some(any_value(depth))),
            Value::Bool(false) => return Ok(None),
            Value::Object(map) => map,
            _ => return Err(invalid(path, "a schema must be an object or a boolean")),
        };
        for key in map.keys() {
            if !HANDLED.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
                return Err(unsupported(key, path));
            }
        }
        if let Some(r) = map.get("$ref") {
            if map
                .keys()
                .any(|k| HANDLED.contains(&k.as_str()) && k != "$ref")
            {
                return Err(invalid(
                    path,
                    "$ref beside other validation keywords is not supported",
                ));
            }
            let r = r
                .as_str()
                .ok_or_else(|| invalid(path, "$ref must be a string"))?;
            let target = self.resolve(r, path)?;
            let chain = self.refs.get() + 1;
            if chain > MAX_REF_CHAIN {
                return Err(invalid(path, format!("$ref {r:?}: more than {MAX_REF_CHAIN} references inside one another (a cycle without nesting?)")));
            }
            self.refs.set(chain);
            let out = self.value(target, r, depth);
            self.refs.set(chain - 1);
            return out;
        }
        // const / enum: the listed values of the sibling `type` (other sibling keywords are
        // not applied to them).
        let typed = |v: &Value| -> bool {
            match map.get("type") {
                None => true,
                Some(Value::String(t)) => has_type(v, t),
                Some(Value::Array(ts)) => ts
                    .iter()
                    .any(|t| t.as_str().is_some_and(|t| has_type(v, t))),
                Some(_) => false,
            }
        };
        if let Some(v) = map.get("const") {
            return Ok(typed(v).then(|| literal(v)));
        }
        if let Some(e) = map.get("enum") {
            let items = e
                .as_array()
                .filter(|a| !a.is_empty())
                .ok_or_else(|| invalid(&format!("{path}/enum"), "must be a non-empty array"))?;
            let alts: Vec<String> = items.iter().filter(|v| typed(v)).map(literal).collect();
            return Ok((!alts.is_empty()).then(|| format!("(?:{})", alts.join("|"))));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(list) = map.get(key) {
                let list = list.as_array().filter(|a| !a.is_empty()).ok_or_else(|| {
                    invalid(&format!("{path}/{key}"), "must be a non-empty array")
                })?;
                let mut alts = Vec::new();
                for (i, s) in list.iter().enumerate() {
                    let merged = merge_siblings(map, s, key);
                    if let Some(r) = self.value(&merged, &format!("{path}/{key}/{i}"), depth)? {
                        alts.push(r);
                    }
                }
                return Ok((!alts.is_empty()).then(|| format!("(?:{})", alts.join("|"))));
            }
        }
        if let Some(list) = map.get("allOf") {
            let list = list
                .as_array()
                .ok_or_else(|| invalid(&format!("{path}/allOf"), "must be an array"))?;
            if list.len() != 1 {
                return Err(invalid(
                    &format!("{path}/allOf"),
                    "allOf is supported with exactly one schema",
                ));
            }
            return self.value(
                &merge_siblings(map, &list[0], "allOf"),
                &format!("{path}/allOf/0"),
                depth,
            );
        }
        let types: Vec<&str> = match map.get("type") {
            None => infer_type(map),
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts
                .iter()
                .map(|t| {
                    t.as_str()
                        .ok_or_else(|| invalid(&format!("{path}/type"), "must name types"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(invalid(
                    &format!("{path}/type"),
                    "must be a string or an array",
                ))
            }
        };
        if types.is_empty() {
            return Ok(Some(any_value(depth)));
        }
        let mut alts = Vec::new();
        for t in types {
            if let Some(r) = self.typed(t, map, path, depth)? {
                alts.push(r);
            }
        }
        Ok(match alts.len() {
            0 => None,
            1 => alts.pop(),
            _ => Some(format!("(?:{})", alts.join("|"))),
        })
    }

    fn resolve(&self, r: &str, path: &str) -> Result<&Value, ConstraintError> {
        if r == "#" {
            return Ok(self.root);
        }
        let pointer = r
            .strip_prefix('#')
            .filter(|p| p.starts_with('/'))
            .ok_or_else(|| {
                invalid(
                    path,
                    format!("$ref {r:?}: only local references (#/…) are supported"),
                )
            })?;
        self.root
            .pointer(pointer)
            .ok_or_else(|| invalid(path, format!("$ref {r:?} does not resolve")))
    }

    fn typed(
        &self,
        t: &str,
        map: &Map<String, Value>,
        path: &str,
        depth: u32,
    ) -> Result<Option<String>, ConstraintError> {
        Ok(Some(match t {
            "string" => string_regex(map, path)?,
            "integer" => {
                let lo = int_bound(map, path, "minimum", "exclusiveMinimum", true)?;
                let hi = int_bound(map, path, "maximum", "exclusiveMaximum", false)?;
                match (lo, hi) {
                    (Some(a), Some(b)) if a > b => return Ok(None),
                    _ => integer_range(lo, hi),
                }
            }
            "number" => {
                for k in ["exclusiveMinimum", "exclusiveMaximum"] {
                    if map.contains_key(k) {
                        return Err(invalid(
                            &format!("{path}/{k}"),
                            "exclusive bounds are supported for integers only",
                        ));
                    }
                }
                let lo = number_bound(map, path, "minimum")?;
                let hi = number_bound(map, path, "maximum")?;
                match (lo, hi) {
                    (None, None) => format!("{INTEGER}{FRACTION}{EXPONENT}"),
                    (Some(a), Some(b)) if a > b => return Ok(None),
                    _ => number_range(lo, hi),
                }
            }
            "boolean" => "(?:true|false)".to_string(),
            "null" => "null".to_string(),
            "array" => return self.array(map, path, depth),
            "object" => return self.object(map, path, depth),
            other => {
                return Err(invalid(
                    &format!("{path}/type"),
                    format!("unknown type {other:?}"),
                ))
            }
        }))
    }

    fn array(
        &self,
        map: &Map<String, Value>,
        path: &str,
        depth: u32,
    ) -> Result<Option<String>, ConstraintError> {
        let min = count(map, "minItems", path)?.unwrap_or(0);
        let max = count(map, "maxItems", path)?;
        if max.is_some_and(|m| m < min) {
            return Ok(None);
        }
        if min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT) {
            return Err(invalid(
                path,
                format!("minItems/maxItems above {MAX_REPEAT} are not supported"),
            ));
        }
        if depth == 0 {
            return Ok((min == 0).then(|| format!(r"\[{WS}\]")));
        }
        let item = match map.get("items") {
            None => Some(any_value(depth - 1)),
            Some(s @ (Value::Object(_) | Value::Bool(_))) => {
                self.value(s, &format!("{path}/items"), depth - 1)?
            }
            Some(_) => {
                return Err(invalid(
                    &format!("{path}/items"),
                    "must be a schema (tuples are not supported)",
                ))
            }
        };
        Ok(match item {
            Some(item) => Some(array_of(&item, min, max)),
            None if min == 0 => Some(format!(r"\[{WS}\]")),
            None => None,
        })
    }

    fn object(
        &self,
        map: &Map<String, Value>,
        path: &str,
        depth: u32,
    ) -> Result<Option<String>, ConstraintError> {
        let empty = Map::new();
        let props = match map.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => return Err(invalid(&format!("{path}/properties"), "must be an object")),
        };
        let required: Vec<&str> = match map.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r
                .iter()
                .map(|k| {
                    k.as_str()
                        .ok_or_else(|| invalid(&format!("{path}/required"), "must list names"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(invalid(&format!("{path}/required"), "must be an array")),
        };
        for r in &required {
            if !props.contains_key(*r) {
                return Err(invalid(
                    &format!("{path}/required"),
                    format!("required property {r:?} is not in properties"),
                ));
            }
        }
        if props.is_empty() {
            // A free-form object: string keys, values of `additionalProperties` (any JSON when
            // absent or true; `false` leaves only `{}`).
            if depth == 0 {
                return Ok(Some(format!(r"\{{{WS}\}}")));
            }
            let value = match map.get("additionalProperties") {
                None | Some(Value::Bool(true)) => Some(any_value(depth - 1)),
                Some(Value::Bool(false)) => None,
                Some(s) => self.value(s, &format!("{path}/additionalProperties"), depth - 1)?,
            };
            return Ok(Some(match value {
                Some(v) => object_of(&v),
                None => format!(r"\{{{WS}\}}"),
            }));
        }
        // Declared properties only, in the schema's order (valid whatever additionalProperties
        // says).
        let mut members: Vec<(String, bool)> = Vec::new();
        for (name, schema) in props {
            let is_required = required.contains(&name.as_str());
            let value = if depth == 0 {
                None
            } else {
                self.value(schema, &format!("{path}/properties/{name}"), depth - 1)?
            };
            match value {
                Some(v) => members.push((
                    format!("{}{WS}:{WS}{v}", literal(&Value::String(name.clone()))),
                    is_required,
                )),
                None if is_required => return Ok(None),
                None => {}
            }
        }
        let body = if let Some(last) = members.iter().rposition(|(_, r)| *r) {
            let mut s = String::new();
            for (i, (m, req)) in members.iter().enumerate() {
                let part = if i < last {
                    format!("{m}{WS},{WS}")
                } else if i > last {
                    format!("{WS},{WS}{m}")
                } else {
                    m.clone()
                };
                if *req {
                    s.push_str(&part);
                } else {
                    s.push_str(&format!("(?:{part})?"));
                }
            }
            s
        } else if members.is_empty() {
            String::new()
        } else {
            // Nothing required: choose the first member present, then any later ones in order.
            let firsts: Vec<String> = (0..members.len())
                .map(|i| {
                    let mut s = members[i].0.clone();
                    for (m, _) in &members[i + 1..] {
                        s.push_str(&format!("(?:{WS},{WS}{m})?"));
                    }
                    s
                })
                .collect();
            format!("(?:{})?", firsts.join("|"))
        };
        Ok(Some(format!(r"\{{{WS}{body}{WS}\}}")))
    }
}

/// `type` when absent: inferred from the keywords present (none: any value).
fn infer_type(map: &Map<String, Value>) -> Vec<&'static str> {
    let has = |keys: &[&str]| keys.iter().any(|k| map.contains_key(*k));
    if has(&["properties", "required", "additionalProperties"]) {
        vec!["object"]
    } else if has(&["items", "minItems", "maxItems"]) {
        vec!["array"]
    } else if has(&["minLength", "maxLength", "pattern", "format"]) {
        vec!["string"]
    } else if has(&["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]) {
        vec!["number"]
    } else {
        Vec::new()
    }
}

/// `anyOf`/`oneOf`/`allOf` members inherit their parent's other keywords (`type`, bounds …).
/// `properties` are merged (the member's win) and `required` united; `true` is `{}`.
fn merge_siblings(parent: &Map<String, Value>, member: &Value, keyword: &str) -> Value {
    let m = match member {
        Value::Object(m) => m.clone(),
        Value::Bool(true) => Map::new(),
        _ => return member.clone(),
    };
    let mut merged = m;
    for (k, v) in parent {
        if k == keyword || ANNOTATIONS.contains(&k.as_str()) {
            continue;
        }
        match (k.as_str(), merged.get_mut(k), v) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (name, s) in theirs {
                    mine.entry(name.clone()).or_insert_with(|| s.clone());
                }
            }
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                for r in theirs {
                    if !mine.contains(r) {
                        mine.push(r.clone());
                    }
                }
            }
            (_, None, _) => {
                merged.insert(k.clone(), v.clone());
            }
            _ => {}
        }
    }
    Value::Object(merged)
}

/// Whether `v` is of JSON Schema type `t`.
fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|x| x.fract() == 0.0),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
}

fn string_regex(map: &Map<String, Value>, path: &str) -> Result<String, ConstraintError> {
    let min = count(map, "minLength", path)?;
    let max = count(map, "maxLength", path)?;
    if min.is_some_and(|m| m > MAX_REPEAT) || max.is_some_and(|m| m > MAX_REPEAT) {
        return Err(invalid(
            path,
            format!("minLength/maxLength above {MAX_REPEAT} are not supported"),
        ));
    }
    let pattern = map.get("pattern");
    let format = map.get("format");
    if (pattern.is_some() || format.is_some()) && (min.is_some() || max.is_some()) {
        return Err(invalid(
            path,
            "minLength/maxLength together with pattern or format are not supported",
        ));
    }
    if let Some(p) = pattern {
        let p = p
            .as_str()
            .ok_or_else(|| invalid(&format!("{path}/pattern"), "must be a string"))?;
        // Over the string's characters, as the JSON text writes them (json_pattern.rs).
        let inner = string_pattern(p, STRING_CHAR)
            .map_err(|e| invalid(&format!("{path}/pattern"), e.to_string()))?;
        return Ok(format!(r#""{inner}""#));
    }
    if let Some(f) = format {
        let body = match f.as_str() {
            Some("date") => DATE.to_string(),
            Some("time") => TIME.to_string(),
            Some("date-time") => format!("{DATE}T{TIME}"),
            Some("email") => EMAIL.to_string(),
            Some("uuid") => UUID.to_string(),
            _ => {
                return Err(invalid(
                    &format!("{path}/format"),
                    format!("format {f} is not supported (date, time, date-time, email, uuid are)"),
                ))
            }
        };
        return Ok(format!(r#""{body}""#));
    }
    let reps = match (min, max) {
        (None, None) => "*".to_string(),
        (Some(a), None) => format!("{{{a},}}"),
        (a, Some(b)) => format!("{{{},{b}}}", a.unwrap_or(0)),
    };
    Ok(format!(r#""{STRING_CHAR}{reps}""#))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::constraint::byte_dfa::FullMatch;

    fn full(re: &str) -> FullMatch {
        FullMatch::new(re)
    }

    #[test]
    fn unsupported_keywords_are_named_with_their_path() {
        let schema = serde_json::json!({"type": "object", "properties": {"a": {"type": "string", "not": {}}}});
        match schema_regex(&schema, 8) {
            Err(ConstraintError::UnsupportedKeyword { keyword, path }) => {
                assert_eq!(keyword, "not");
                assert_eq!(path, "#/properties/a");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn objects_keep_the_schema_order_and_optional_members() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"b": {"type": "integer"}, "a": {"type": "boolean"}, "c": {"type": "null"}},
            "required": ["a"],
        });
        let re = full(&schema_regex(&schema, 8).unwrap());
        for ok in [
            r#"{"a":true}"#,
            r#"{"b":1,"a":false}"#,
            r#"{"a":true,"c":null}"#,
            r#"{ "b": 2, "a": true, "c": null }"#,
        ] {
            assert!(re.is_match(ok), "{ok}");
        }
        for bad in [
            r#"{}"#,
            r#"{"a":true,"b":1}"#,
            r#"{"b":1}"#,
            r#"{"a":true,}"#,
            r#"{"a":1}"#,
        ] {
            assert!(!re.is_match(bad), "{bad}");
        }
    }

    #[test]
    fn recursion_is_unrolled_to_the_depth() {
        let schema = serde_json::json!({
            "$defs": {"node": {"type": "object", "properties": {
                "v": {"type": "integer"},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}
            }, "required": ["v"]}},
            "$ref": "#/$defs/node"
        });
        let re = full(&schema_regex(&schema, 6).unwrap());
        assert!(re.is_match(r#"{"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]}"#));
        assert!(!re.is_match(r#"{"kids":[]}"#));
    }
}
