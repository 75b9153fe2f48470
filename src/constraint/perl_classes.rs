//! `\d`, `\w`, `\s` and their negations with JavaScript's meaning (ASCII digits and word
//! characters; JSON Schema patterns are ECMA-262 regexes), rewritten as explicit classes before
//! regex-syntax sees them. regex-syntax would read them as Unicode classes, which needs its
//! Unicode tables (14 KB gzipped in the wasm) and lets `\d` match digits a JSON Schema
//! validator rejects.

use super::error::ConstraintError;

const DIGIT: &str = "0-9";
const WORD: &str = "0-9A-Za-z_";
/// ECMA-262's WhiteSpace and LineTerminator.
const SPACE: &str =
    r"\t\n\x0B\x0C\r \xA0\u{1680}\u{2000}-\u{200A}\u{2028}\u{2029}\u{202F}\u{205F}\u{3000}\u{FEFF}";

/// `pattern` with every Perl class spelled out.
pub fn ascii_perl_classes(pattern: &str) -> Result<String, ConstraintError> {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut in_class = false;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(e) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let set = match e.to_ascii_lowercase() {
                    'd' => Some(DIGIT),
                    'w' => Some(WORD),
                    's' => Some(SPACE),
                    _ => None,
                };
                match (set, e.is_ascii_uppercase(), in_class) {
                    (Some(s), false, false) => out.push_str(&format!("[{s}]")),
                    (Some(s), true, false) => out.push_str(&format!("[^{s}]")),
                    (Some(s), false, true) => out.push_str(s),
                    (Some(_), true, true) => {
                        return Err(ConstraintError::InvalidRegex(format!(
                            "\\{e} inside a character class is not supported"
                        )))
                    }
                    (None, _, _) => {
                        out.push('\\');
                        out.push(e);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                // `[^]…]` / `[]…]`: a leading `]` is a literal.
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push(']');
                    chars.next();
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_classes_become_ascii_classes() {
        assert_eq!(
            ascii_perl_classes(r"^\d{3}-\w+$").unwrap(),
            "^[0-9]{3}-[0-9A-Za-z_]+$"
        );
        assert_eq!(ascii_perl_classes(r"[\d.]+\D").unwrap(), "[0-9.]+[^0-9]");
        assert_eq!(ascii_perl_classes(r"\\d\.").unwrap(), r"\\d\.");
        assert_eq!(ascii_perl_classes(r"[]\d]").unwrap(), "[]0-9]");
        assert!(ascii_perl_classes(r"[\W]").is_err());
    }
}
