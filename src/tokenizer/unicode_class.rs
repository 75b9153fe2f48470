//! The code point classes that llama.cpp's pre-tokenizer regexes ask about (`\p{L}`,
//! `\p{N}`, `\p{P}`, `\s`), from the Unicode general category.
//!
//! llama.cpp's `unicode_cpt_flags` gives every code point exactly one category
//! (N, L, Z, M, P, S, C or undefined) plus a separate whitespace bit (the Unicode
//! `White_Space` property, which is what Rust's `char::is_whitespace` implements).

use unicode_general_category::{get_general_category, GeneralCategory as Gc};

/// One code point's classes, the subset of llama.cpp's flags that the splitters use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CharClass {
    pub letter: bool,
    pub number: bool,
    pub punctuation: bool,
    pub whitespace: bool,
}

impl CharClass {
    pub(crate) fn of(c: char) -> CharClass {
        if c.is_ascii() {
            // Fast path: ASCII is the bulk of most prompts.
            let b = c as u8;
            return CharClass {
                letter: b.is_ascii_alphabetic(),
                number: b.is_ascii_digit(),
                punctuation: b.is_ascii_punctuation() && !b"$+<=>^`|~".contains(&b),
                // U+0009..U+000D and U+0020; U+001C..U+001F are not White_Space.
                whitespace: c.is_whitespace(),
            };
        }
        let gc = get_general_category(c);
        CharClass {
            letter: matches!(
                gc,
                Gc::UppercaseLetter
                    | Gc::LowercaseLetter
                    | Gc::TitlecaseLetter
                    | Gc::ModifierLetter
                    | Gc::OtherLetter
            ),
            number: matches!(gc, Gc::DecimalNumber | Gc::LetterNumber | Gc::OtherNumber),
            punctuation: matches!(
                gc,
                Gc::ConnectorPunctuation
                    | Gc::DashPunctuation
                    | Gc::OpenPunctuation
                    | Gc::ClosePunctuation
                    | Gc::InitialPunctuation
                    | Gc::FinalPunctuation
                    | Gc::OtherPunctuation
            ),
            whitespace: c.is_whitespace(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert!(CharClass::of('é').letter);
        assert!(CharClass::of('日').letter);
        assert!(CharClass::of('٣').number); // Arabic-Indic digit
        assert!(CharClass::of('½').number);
        assert!(CharClass::of('\u{3000}').whitespace);
        assert!(CharClass::of('!').punctuation);
        assert!(!CharClass::of('$').punctuation);
        let rocket = CharClass::of('🚀');
        assert!(!rocket.letter && !rocket.number && !rocket.whitespace);
    }
}
