//! A JSON Schema `pattern` — a regex over a string's characters — as a regex over the JSON text
//! of that string (what is generated): `"` and `\` become their escapes, control characters
//! their JSON escapes, classes keep only the characters a JSON string holds raw plus those
//! escapes. A pattern is a search: an alternative without `^` (`$`) may have any characters
//! before (after) it. Anchors elsewhere in the pattern are an error.

use super::error::ConstraintError;
use super::perl_classes::ascii_perl_classes;
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look, Repetition};

/// The characters a JSON string holds without escaping them (as `json_schema::STRING_CHAR`).
fn raw_json_chars() -> ClassUnicode {
    ClassUnicode::new([
        ClassUnicodeRange::new('\u{20}', '\u{21}'),
        ClassUnicodeRange::new('\u{23}', '\u{5B}'),
        ClassUnicodeRange::new('\u{5D}', '\u{7E}'),
        ClassUnicodeRange::new('\u{80}', '\u{10FFFF}'),
    ])
}

fn invalid(reason: impl Into<String>) -> ConstraintError {
    ConstraintError::InvalidRegex(reason.into())
}

/// The JSON text of `s` inside a string (without the quotes).
fn escaped(s: &str) -> String {
    let quoted = serde_json::Value::String(s.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

fn contains(c: &ClassUnicode, ch: char) -> bool {
    c.ranges().iter().any(|r| r.start() <= ch && ch <= r.end())
}

/// `h` over characters → `h` over their JSON text.
fn encode(h: &Hir) -> Result<Hir, ConstraintError> {
    Ok(match h.kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(lit) => {
            let s = std::str::from_utf8(&lit.0)
                .map_err(|_| invalid("pattern: a literal that is not UTF-8"))?;
            Hir::literal(escaped(s).into_bytes())
        }
        HirKind::Class(Class::Unicode(c)) => {
            let mut raw = c.clone();
            raw.intersect(&raw_json_chars());
            let mut alts = Vec::new();
            if !raw.ranges().is_empty() {
                alts.push(Hir::class(Class::Unicode(raw)));
            }
            // Characters JSON escapes: `"`, `\` and the control characters.
            for ch in ['"', '\\']
                .into_iter()
                .chain((0u8..0x20).map(char::from))
                .chain(['\u{7F}'])
            {
                if contains(c, ch) {
                    alts.push(Hir::literal(escaped(&ch.to_string()).into_bytes()));
                }
            }
            if alts.is_empty() {
                Hir::fail()
            } else {
                Hir::alternation(alts)
            }
        }
        HirKind::Class(Class::Bytes(_)) => {
            return Err(invalid("pattern: byte classes are not supported"))
        }
        // `^` and `$` (checked by `string_pattern` to be at the ends of every match).
        HirKind::Look(Look::Start | Look::End) => Hir::empty(),
        HirKind::Look(_) => {
            return Err(invalid(
                "pattern: word boundaries and multi-line anchors are not supported",
            ))
        }
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            min: r.min,
            max: r.max,
            greedy: r.greedy,
            sub: Box::new(encode(&r.sub)?),
        }),
        HirKind::Capture(c) => encode(&c.sub)?,
        HirKind::Concat(v) => Hir::concat(v.iter().map(encode).collect::<Result<_, _>>()?),
        HirKind::Alternation(v) => {
            Hir::alternation(v.iter().map(encode).collect::<Result<_, _>>()?)
        }
    })
}

/// The regex of a JSON string's contents (no quotes) whose characters match the JSON Schema
/// `pattern`; `any` is one character of a JSON string (for unanchored sides).
pub fn string_pattern(pattern: &str, any: &str) -> Result<String, ConstraintError> {
    let p = ascii_perl_classes(pattern)?;
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(&p)
        .map_err(|e| invalid(format!("pattern: {e}")))?;
    // `^` (`$`) must begin (end) every match or none: a side is anchored or open to any
    // characters as a whole.
    let props = hir.properties();
    let side = |look: Look, every: bool, name: &str| -> Result<String, ConstraintError> {
        if every {
            Ok(String::new())
        } else if props.look_set().contains(look) {
            Err(invalid(format!(
                "pattern: {name} is supported only at the {} of every alternative",
                if look == Look::Start { "start" } else { "end" }
            )))
        } else {
            Ok(format!("{any}*"))
        }
    };
    let head = side(
        Look::Start,
        props.look_set_prefix().contains(Look::Start),
        "^",
    )?;
    let tail = side(Look::End, props.look_set_suffix().contains(Look::End), "$")?;
    Ok(format!("{head}(?:{}){tail}", encode(&hir)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constraint::byte_dfa::ByteDfa;

    const ANY: &str = r#"(?:[^"\\\x00-\x1F\x7F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})"#;

    fn json_string(pattern: &str) -> ByteDfa {
        ByteDfa::new(&format!(r#""{}""#, string_pattern(pattern, ANY).unwrap())).unwrap()
    }

    #[test]
    fn classes_keep_to_json_string_characters() {
        let d = json_string("^[^@]+@[^@]+$");
        assert!(d.matches(br#""a@b""#));
        assert!(d.matches(br#""a\"x@b""#), "a quote, escaped");
        assert!(!d.matches(br#""a"@b""#), "a raw quote ends the string");
        assert!(!d.matches(b"\"a\n@b\""), "a raw control character");
        assert!(d.matches(br#""a\n@b""#), "its escape");
    }

    #[test]
    fn anchors_and_search() {
        let d = json_string(r"^\d+$|^none$");
        for (t, m) in [
            (r#""12""#, true),
            (r#""none""#, true),
            (r#""1x""#, false),
            (r#""xnone""#, false),
        ] {
            assert_eq!(d.matches(t.as_bytes()), m, "{t}");
        }
        let search = json_string("ab");
        assert!(search.matches(br#""xxabyy""#) && !search.matches(br#""xaxb""#));
        assert!(matches!(
            string_pattern(r"a\bb", ANY),
            Err(ConstraintError::InvalidRegex(_))
        ));
        assert!(matches!(
            string_pattern("a^b", ANY),
            Err(ConstraintError::InvalidRegex(_))
        ));
        let literal = json_string(r#"^say "hi"\\$"#);
        assert!(literal.matches(br#""say \"hi\"\\""#));
    }
}
