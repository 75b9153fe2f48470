//! Pre-tokenization of byte-level BPE models: splitting text into words before merging,
//! chosen by `tokenizer.ggml.pre` exactly as llama.cpp's `llm_tokenizer_bpe` does.
//!
//! llama.cpp runs a list of regexes, each one refining the pieces of the previous one
//! (`unicode_regex_split`). The two big regexes (GPT-2's and Llama 3's) need a lookahead
//! (`\s+(?!\S)`) that Rust's `regex` lacks; llama.cpp itself does not run them as regexes
//! either but with hand-written matchers (`unicode_regex_split_custom_gpt2/_llama3`).
//! We port those matchers, so we agree with llama.cpp even where it and a real regex
//! engine would differ, and carry no regex engine into the wasm bundle.
//! The small one-class regexes (`\p{N}`, `\p{N}+`, ...) go through llama.cpp's
//! `std::regex` path: a match is a piece, and so is each unmatched gap between matches.

use super::error::TokenizerError;
use super::unicode_class::CharClass;

/// One regex of llama.cpp's `regex_exprs` lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
    Gpt2,
    /// `(?:'[sS]|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    Llama3 { max_digits: usize },
    /// `\p{N}`: every number character alone.
    EachNumber,
    /// `\p{N}+`
    NumberRun,
    /// `[\p{P}\$\+<=>\^~\|]+`
    PunctRun,
    /// `[0-9][0-9][0-9]`
    AsciiDigitTriple,
}

/// The pre-tokenizer of one vocabulary, plus the defaults llama.cpp ties to its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PreTokenizer {
    passes: &'static [Pass],
    /// A word that is already a token is emitted whole, skipping merges (llama3 family).
    pub ignore_merges: bool,
    /// The add_bos default when `tokenizer.ggml.add_bos_token` is absent.
    pub add_bos_default: bool,
    /// llama.cpp drops the default BOS id for this family (chatglm).
    pub no_default_bos: bool,
}

const DEFAULT: &[Pass] = &[
    Pass::PunctRun,
    Pass::Gpt2,
    Pass::NumberRun,
    Pass::AsciiDigitTriple,
];
const GPT2: &[Pass] = &[Pass::Gpt2];
const STARCODER: &[Pass] = &[Pass::EachNumber, Pass::Gpt2];
const LLAMA3: &[Pass] = &[Pass::Llama3 { max_digits: 3 }];
const QWEN2: &[Pass] = &[Pass::Llama3 { max_digits: 1 }];

impl PreTokenizer {
    /// Maps `tokenizer.ggml.pre` to llama.cpp's pre-tokenizer type (`llama_vocab::impl::load`).
    pub(crate) fn from_name(pre: Option<&str>) -> Result<PreTokenizer, TokenizerError> {
        let mut out = PreTokenizer {
            passes: DEFAULT,
            ignore_merges: false,
            add_bos_default: false,
            no_default_bos: false,
        };
        let Some(name) = pre else { return Ok(out) };
        match name {
            "default" => {}
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => {
                out.passes = LLAMA3;
                out.ignore_merges = true;
                out.add_bos_default = true;
            }
            "dbrx" | "smaug-bpe" => out.passes = LLAMA3,
            "glm4" | "chatglm-bpe" => {
                out.passes = LLAMA3;
                out.no_default_bos = true;
            }
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "megrez" | "stablelm2"
            | "hunyuan" | "solar-open" => out.passes = QWEN2,
            "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone"
            | "minerva-7b" | "mellum2" => out.passes = STARCODER,
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" | "jina-v1-en"
            | "jina-v2-code" | "roberta-bpe" | "exaone4" | "mpt" | "olmo" | "jais" | "trillion"
            | "granite-docling" => out.passes = GPT2,
            other => return Err(TokenizerError::UnsupportedPreTokenizer(other.to_string())),
        }
        Ok(out)
    }

    /// Splits `text` into words, returned as byte ranges of `text` in order, covering it.
    pub(crate) fn split(&self, text: &str) -> Vec<std::ops::Range<usize>> {
        let chars: Vec<char> = text.chars().collect();
        let classes: Vec<CharClass> = chars.iter().map(|c| CharClass::of(*c)).collect();
        // Piece lengths in chars, as llama.cpp's `bpe_offsets`.
        let mut pieces = vec![chars.len()];
        for pass in self.passes {
            let mut next = Vec::with_capacity(pieces.len());
            let mut start = 0;
            for len in pieces {
                let seg = Segment {
                    chars: &chars[start..start + len],
                    classes: &classes[start..start + len],
                };
                match *pass {
                    Pass::Gpt2 => seg.gpt2(&mut next),
                    Pass::Llama3 { max_digits } => seg.llama3(max_digits, &mut next),
                    Pass::EachNumber => {
                        seg.matches(&mut next, |s, p| usize::from(s.classes[p].number))
                    }
                    Pass::NumberRun => seg.matches(&mut next, |s, p| s.run(p, |c, _| c.number)),
                    Pass::PunctRun => seg.matches(&mut next, |s, p| {
                        s.run(p, |c, ch| c.punctuation || "$+<=>^~|".contains(ch))
                    }),
                    Pass::AsciiDigitTriple => seg.matches(&mut next, |s, p| {
                        let triple = s
                            .chars
                            .get(p..p + 3)
                            .is_some_and(|t| t.iter().all(char::is_ascii_digit));
                        if triple {
                            3
                        } else {
                            0
                        }
                    }),
                }
                start += len;
            }
            pieces = next;
        }
        let mut out = Vec::with_capacity(pieces.len());
        let mut byte = 0;
        let mut ch = 0;
        for len in pieces {
            let bytes: usize = chars[ch..ch + len].iter().map(|c| c.len_utf8()).sum();
            out.push(byte..byte + bytes);
            byte += bytes;
            ch += len;
        }
        out
    }
}

/// One piece being refined, with positions relative to its start.
struct Segment<'a> {
    chars: &'a [char],
    classes: &'a [CharClass],
}

impl Segment<'_> {
    /// Class at `pos`, `None` past the end (llama.cpp's all-zero "out of range" flags).
    fn class(&self, pos: usize) -> Option<CharClass> {
        self.classes.get(pos).copied()
    }
    fn is(&self, pos: usize, f: impl Fn(CharClass) -> bool) -> bool {
        self.class(pos).is_some_and(f)
    }
    fn len(&self) -> usize {
        self.chars.len()
    }
    /// Length of the run from `pos` of chars satisfying `f`.
    fn run(&self, pos: usize, f: impl Fn(CharClass, char) -> bool) -> usize {
        (pos..self.len())
            .take_while(|&p| f(self.classes[p], self.chars[p]))
            .count()
    }

    /// `std::regex_iterator` over a pattern: `m(pos)` is the match length at pos (0: none).
    fn matches(&self, out: &mut Vec<usize>, m: impl Fn(&Self, usize) -> usize) {
        let (mut pos, mut prev) = (0, 0);
        while pos < self.len() {
            let n = m(self, pos);
            if n == 0 {
                pos += 1;
                continue;
            }
            if pos > prev {
                out.push(pos - prev);
            }
            out.push(n);
            pos += n;
            prev = pos;
        }
        if self.len() > prev {
            out.push(self.len() - prev);
        }
    }

    /// `'s|'t|'re|'ve|'m|'ll|'d` (ASCII case folded when `fold`): length of the match at pos.
    fn contraction(&self, pos: usize, fold: bool) -> usize {
        let at = |p: usize| {
            let c = self.chars.get(p).copied().unwrap_or('\0');
            if fold {
                c.to_ascii_lowercase()
            } else {
                c
            }
        };
        if self.chars.get(pos) != Some(&'\'') || pos + 1 >= self.len() {
            return 0;
        }
        match at(pos + 1) {
            's' | 't' | 'm' | 'd' => 2,
            'r' | 'v' if pos + 2 < self.len() && at(pos + 2) == 'e' => 3,
            'l' if pos + 2 < self.len() && at(pos + 2) == 'l' => 3,
            _ => 0,
        }
    }

    /// Whitespace run at pos: (length, end of its last `\r`/`\n` or 0).
    fn whitespace_run(&self, pos: usize) -> (usize, usize) {
        let n = self.run(pos, |c, _| c.whitespace);
        let last_nl = (pos..pos + n)
            .rev()
            .find(|&p| matches!(self.chars[p], '\r' | '\n'));
        (n, last_nl.map_or(0, |p| p + 1))
    }

    /// `\s+(?!\S)|\s+` over a whitespace run of `n` at pos: where the piece ends.
    fn whitespace_end(&self, pos: usize, n: usize) -> usize {
        if n > 1 && pos + n < self.len() {
            pos + n - 1 // leave the last space to prefix the next word
        } else if n > 0 {
            pos + n
        } else {
            pos + 1 // no match: one char alone
        }
    }

    /// Port of llama.cpp's `unicode_regex_split_custom_gpt2`.
    fn gpt2(&self, out: &mut Vec<usize>) {
        let mut pos = 0;
        let mut push = |from: usize, to: usize| out.push(to - from);
        while pos < self.len() {
            let start = pos;
            let c = self.chars[pos];
            let n = self.contraction(pos, false);
            if n > 0 {
                pos += n;
                push(start, pos);
                continue;
            }
            // ` ?X+` for X in letter, number, other: the optional space only if X follows.
            let lead = usize::from(c == ' ');
            let f2 = if c == ' ' {
                self.class(pos + 1)
            } else {
                self.class(pos)
            };
            let kind: Option<fn(CharClass) -> bool> = match f2 {
                Some(f) if f.letter => Some(|c| c.letter),
                Some(f) if f.number => Some(|c| c.number),
                Some(f) if !f.whitespace => Some(|c| !(c.whitespace || c.letter || c.number)),
                _ => None,
            };
            if let Some(is_kind) = kind {
                pos += lead;
                while self.is(pos, is_kind) {
                    pos += 1;
                }
                push(start, pos);
                continue;
            }
            let (n, _) = self.whitespace_run(pos);
            pos = self.whitespace_end(pos, n);
            push(start, pos);
        }
    }

    /// Port of llama.cpp's `unicode_regex_split_custom_llama3` (`max_digits` 3); with
    /// `max_digits` 1 it is the qwen2 regex that llama.cpp runs through `std::regex`.
    fn llama3(&self, max_digits: usize, out: &mut Vec<usize>) {
        let mut pos = 0;
        while pos < self.len() {
            let start = pos;
            let c = self.chars[pos];
            let f = self.classes[pos];
            let n = self.contraction(pos, true);
            if n > 0 {
                out.push(n);
                pos += n;
                continue;
            }
            // [^\r\n\p{L}\p{N}]?\p{L}+
            if !(c == '\r' || c == '\n' || f.number) && (f.letter || self.is(pos + 1, |c| c.letter))
            {
                pos += 1;
                while self.is(pos, |c| c.letter) {
                    pos += 1;
                }
                out.push(pos - start);
                continue;
            }
            // \p{N}{1,max_digits}
            if f.number {
                let mut ini = pos;
                while self.is(pos, |c| c.number) {
                    pos += 1;
                    if pos - ini >= max_digits {
                        out.push(pos - ini);
                        ini = pos;
                    }
                }
                if pos > ini {
                    out.push(pos - ini);
                }
                continue;
            }
            // ` ?[^\s\p{L}\p{N}]+[\r\n]*`; as in llama.cpp a lone trailing space lands here too.
            let f2 = if c == ' ' {
                self.class(pos + 1)
            } else {
                Some(f)
            };
            if f2.is_none_or(|f| !(f.whitespace || f.letter || f.number)) {
                pos += usize::from(c == ' ');
                while self.is(pos, |c| !(c.whitespace || c.letter || c.number)) {
                    pos += 1;
                }
                while matches!(self.chars.get(pos), Some('\r' | '\n')) {
                    pos += 1;
                }
                out.push(pos - start);
                continue;
            }
            let (n, last_nl) = self.whitespace_run(pos);
            // \s*[\r\n]+
            pos = if last_nl > 0 {
                last_nl
            } else {
                self.whitespace_end(pos, n)
            };
            out.push(pos - start);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: Option<&str>, text: &str) -> Vec<String> {
        let p = PreTokenizer::from_name(pre).unwrap();
        p.split(text)
            .into_iter()
            .map(|r| text[r].to_string())
            .collect()
    }

    #[test]
    fn gpt2_leaves_the_last_space_to_the_next_word() {
        // `\s+(?!\S)`: of a run of spaces, the last one prefixes the following word.
        assert_eq!(words(Some("gpt-2"), "a   b  "), ["a", "  ", " b", "  "]);
        assert_eq!(
            words(Some("gpt-2"), "don't\n\nx"),
            ["don", "'t", "\n", "\n", "x"]
        );
    }

    #[test]
    fn starcoder_family_splits_every_digit() {
        assert_eq!(
            words(Some("smollm"), "x 2026!"),
            ["x", " ", "2", "0", "2", "6", "!"]
        );
    }

    #[test]
    fn llama3_groups_digits_by_three_and_newlines() {
        assert_eq!(
            words(Some("llama-bpe"), "12345 I'LL\n\n go"),
            ["123", "45", " I", "'LL", "\n\n", " go"]
        );
        assert_eq!(words(Some("qwen2"), "123"), ["1", "2", "3"]);
    }

    #[test]
    fn default_isolates_punctuation_and_digit_triples() {
        assert_eq!(words(None, "ab, 12345"), ["ab", ",", " ", "123", "45"]);
    }
}
