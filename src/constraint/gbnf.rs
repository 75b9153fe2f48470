//! GBNF grammars (llama.cpp's format: `rule ::= "literal" [a-z] other-rule (group)* x{2,3} .`,
//! `#` comments, `root` the start) as one regular expression, the form every constraint takes
//! before it becomes a byte DFA.
//!
//! A grammar is context-free and a DFA is not, so a rule that refers to itself (directly or
//! through others) is unrolled: inside its own expansion it may appear again `max_depth` times,
//! and deeper the reference matches nothing (as JSON Schema's recursive `$ref`s and
//! `json_object`'s nesting are bounded). What matches nothing is left out of the pattern
//! (a sequence holding it, an alternative, a repetition beyond zero), so every prefix the DFA
//! accepts can still be completed. Grammars whose recursion is only repetition (most
//! GBNF written for output formats) are exact.
//!
//! Bounds, so a hostile grammar ends in a typed error quickly: the source at most
//! [`MAX_SOURCE`] bytes, parentheses nested at most [`MAX_GROUP_NESTING`] deep, rule references
//! expanded at most [`MAX_EXPANSION_NESTING`] deep, and the regular expression at most
//! [`MAX_PATTERN`] bytes (exponential unrolling meets this first); the DFA's own limits follow.

use super::error::ConstraintError;
use std::collections::HashMap;
use std::fmt::Write;

/// Largest grammar source accepted.
pub const MAX_SOURCE: usize = 256 << 10;
/// Deepest nesting of parentheses.
pub const MAX_GROUP_NESTING: usize = 64;
/// Deepest chain of rule references being expanded at once.
pub const MAX_EXPANSION_NESTING: usize = 200;
/// Largest regular expression a grammar may expand to.
pub const MAX_PATTERN: usize = 256 << 10;

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Literal(String),
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Any,
    Rule(usize),
    Seq(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
}

/// The regular expression of `source`'s `root` rule, recursion unrolled `max_depth` levels.
pub fn gbnf_regex(source: &str, max_depth: u32) -> Result<String, ConstraintError> {
    if source.len() > MAX_SOURCE {
        return Err(ConstraintError::TooLarge {
            what: "grammar source (bytes)",
            needed: source.len() as u64,
            limit: MAX_SOURCE as u64,
        });
    }
    let grammar = Parser::new(source).grammar()?;
    let root = grammar.root(source)?;
    let mut out = Expander {
        grammar: &grammar,
        active: vec![0; grammar.rules.len()],
        nesting: 0,
        max_depth,
        out: String::new(),
    };
    if !out.rule(root)? {
        return Err(ConstraintError::TooDeep { max_depth });
    }
    Ok(out.out)
}

struct Grammar {
    names: Vec<String>,
    /// By rule index; None for a rule referred to but never defined.
    rules: Vec<Option<Node>>,
    /// Where each rule was first referred to (a byte offset), for the error.
    first_use: Vec<usize>,
}

impl Grammar {
    fn root(&self, src: &str) -> Result<usize, ConstraintError> {
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.is_none() {
                let (line, column) = line_column(src, self.first_use[i]);
                return Err(invalid(
                    line,
                    column,
                    format!("rule {:?} is used but never defined", self.names[i]),
                ));
            }
        }
        self.names
            .iter()
            .position(|n| n == "root")
            .ok_or_else(|| invalid(1, 1, "no rule named \"root\" (where the output starts)"))
    }
}

/// (line, column) of byte offset `at`, both from 1, columns in characters.
fn line_column(src: &str, at: usize) -> (usize, usize) {
    let before = &src[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn invalid(line: usize, column: usize, reason: impl Into<String>) -> ConstraintError {
    ConstraintError::InvalidGrammar {
        line,
        column,
        reason: reason.into(),
    }
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    names: HashMap<String, usize>,
    grammar: Grammar,
    groups: usize,
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        Parser {
            src,
            pos: 0,
            names: HashMap::new(),
            grammar: Grammar {
                names: Vec::new(),
                rules: Vec::new(),
                first_use: Vec::new(),
            },
            groups: 0,
        }
    }

    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn peek2(&self) -> Option<char> {
        self.src[self.pos..].chars().nth(1)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn error(&self, reason: impl Into<String>) -> ConstraintError {
        let (line, column) = line_column(self.src, self.pos);
        invalid(line, column, reason)
    }

    /// Blanks and comments; newlines too where `newlines` (between rules, inside parentheses,
    /// after `::=` and `|`), as llama.cpp's parser.
    fn space(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' => {
                    self.bump();
                }
                '\r' | '\n' if newlines => {
                    self.bump();
                }
                '#' => {
                    while !matches!(self.peek(), None | Some('\r' | '\n')) {
                        self.bump();
                    }
                }
                _ => break,
            }
        }
    }

    fn name(&mut self) -> String {
        let start = self.pos;
        while self.peek().is_some_and(is_word_char) {
            self.bump();
        }
        self.src[start..self.pos].to_string()
    }

    fn rule_index(&mut self, name: &str, at: usize) -> usize {
        if let Some(&i) = self.names.get(name) {
            return i;
        }
        let i = self.grammar.names.len();
        self.names.insert(name.to_string(), i);
        self.grammar.names.push(name.to_string());
        self.grammar.rules.push(None);
        self.grammar.first_use.push(at);
        i
    }

    fn grammar(mut self) -> Result<Grammar, ConstraintError> {
        self.space(true);
        while self.peek().is_some() {
            self.rule()?;
            self.space(true);
        }
        if self.grammar.rules.is_empty() {
            return Err(self.error("the grammar has no rules"));
        }
        Ok(self.grammar)
    }

    fn rule(&mut self) -> Result<(), ConstraintError> {
        let at = self.pos;
        let name = self.name();
        if name.is_empty() {
            return Err(self.error(format!(
                "expected a rule name, found {:?}",
                self.peek().unwrap_or(' ')
            )));
        }
        self.space(false);
        if !self.src[self.pos..].starts_with("::=") {
            return Err(self.error(format!("expected ::= after the rule name {name:?}")));
        }
        self.pos += 3;
        self.space(true);
        let body = self.alternates(false)?;
        match self.peek() {
            None | Some('\r' | '\n') => {}
            Some(c) => return Err(self.error(format!("expected the end of the line, found {c:?}"))),
        }
        let i = self.rule_index(&name, at);
        if self.grammar.rules[i].is_some() {
            let (line, column) = line_column(self.src, at);
            return Err(invalid(
                line,
                column,
                format!("rule {name:?} is defined twice"),
            ));
        }
        self.grammar.rules[i] = Some(body);
        Ok(())
    }

    fn alternates(&mut self, nested: bool) -> Result<Node, ConstraintError> {
        let mut alts = vec![self.sequence(nested)?];
        while self.peek() == Some('|') {
            self.bump();
            self.space(true);
            alts.push(self.sequence(nested)?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().unwrap()
        } else {
            Node::Alt(alts)
        })
    }

    fn sequence(&mut self, nested: bool) -> Result<Node, ConstraintError> {
        let mut items: Vec<Node> = Vec::new();
        while let Some(c) = self.peek() {
            let item = match c {
                '"' => {
                    self.bump();
                    let mut s = String::new();
                    loop {
                        match self.peek() {
                            None => return Err(self.error("a literal is not closed (\")")),
                            Some('"') => {
                                self.bump();
                                break;
                            }
                            Some(_) => s.push(self.char()?),
                        }
                    }
                    Node::Literal(s)
                }
                '[' => {
                    self.bump();
                    let negated = self.peek() == Some('^');
                    if negated {
                        self.bump();
                    }
                    let mut ranges = Vec::new();
                    loop {
                        match self.peek() {
                            None => return Err(self.error("a character class is not closed (])")),
                            Some(']') => {
                                self.bump();
                                break;
                            }
                            Some(_) => {
                                let lo = self.char()?;
                                let hi = if self.peek() == Some('-') && self.peek2() != Some(']') {
                                    self.bump();
                                    if self.peek().is_none() {
                                        continue;
                                    }
                                    self.char()?
                                } else {
                                    lo
                                };
                                if hi < lo {
                                    return Err(self
                                        .error(format!("the range {lo:?}-{hi:?} runs backwards")));
                                }
                                ranges.push((lo, hi));
                            }
                        }
                    }
                    Node::Class { negated, ranges }
                }
                '.' => {
                    self.bump();
                    Node::Any
                }
                '(' => {
                    if self.groups == MAX_GROUP_NESTING {
                        return Err(self.error(format!(
                            "parentheses nested deeper than {MAX_GROUP_NESTING}"
                        )));
                    }
                    self.bump();
                    self.groups += 1;
                    self.space(true);
                    let inner = self.alternates(true)?;
                    self.groups -= 1;
                    if self.peek() != Some(')') {
                        return Err(self.error("expected ) to close the group"));
                    }
                    self.bump();
                    inner
                }
                '*' | '+' | '?' | '{' => {
                    let Some(last) = items.pop() else {
                        return Err(self.error(format!("{c:?} follows nothing to repeat")));
                    };
                    let (min, max) = self.repetition()?;
                    Node::Repeat {
                        node: Box::new(last),
                        min,
                        max,
                    }
                }
                c if is_word_char(c) => {
                    let at = self.pos;
                    let name = self.name();
                    Node::Rule(self.rule_index(&name, at))
                }
                '<' => return Err(self.error("token references (<...>) are not supported")),
                '\'' => return Err(self.error("literals are written in double quotes (\"...\")")),
                _ => break,
            };
            items.push(item);
            self.space(nested);
        }
        Ok(if items.len() == 1 {
            items.pop().unwrap()
        } else {
            Node::Seq(items)
        })
    }

    /// `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}` → (min, max).
    fn repetition(&mut self) -> Result<(u32, Option<u32>), ConstraintError> {
        Ok(match self.bump() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            _ => {
                self.space(true);
                let min = self.integer()?;
                self.space(true);
                let max = match self.bump() {
                    Some('}') => Some(min),
                    Some(',') => {
                        self.space(true);
                        if self.peek() == Some('}') {
                            self.bump();
                            None
                        } else {
                            let max = self.integer()?;
                            self.space(true);
                            if self.bump() != Some('}') {
                                return Err(self.error("expected } to close the repetition"));
                            }
                            if max < min {
                                return Err(self.error(format!(
                                    "the repetition {{{min},{max}}} runs backwards"
                                )));
                            }
                            Some(max)
                        }
                    }
                    _ => return Err(self.error("expected , or } in the repetition")),
                };
                (min, max)
            }
        })
    }

    fn integer(&mut self) -> Result<u32, ConstraintError> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
        }
        if start == self.pos {
            return Err(self.error("expected a number in the repetition"));
        }
        self.src[start..self.pos]
            .parse()
            .map_err(|_| self.error("the repetition count is too large"))
    }

    /// One character of a literal or class, escapes decoded (llama.cpp's: `\x` `\u` `\U` with
    /// 2, 4 or 8 hex digits, `\t` `\r` `\n` `\\` `\"` `\[` `\]`; `\-` and `\^` in classes).
    fn char(&mut self) -> Result<char, ConstraintError> {
        let c = self.bump().ok_or_else(|| self.error("unexpected end"))?;
        if c != '\\' {
            return Ok(c);
        }
        let e = self
            .bump()
            .ok_or_else(|| self.error("unexpected end after \\"))?;
        let digits = match e {
            'x' => 2,
            'u' => 4,
            'U' => 8,
            't' => return Ok('\t'),
            'r' => return Ok('\r'),
            'n' => return Ok('\n'),
            '\\' | '"' | '[' | ']' | '-' | '^' => return Ok(e),
            _ => return Err(self.error(format!("unknown escape \\{e}"))),
        };
        let start = self.pos;
        for _ in 0..digits {
            if !self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                return Err(self.error(format!("\\{e} takes {digits} hex digits")));
            }
            self.bump();
        }
        let v = u32::from_str_radix(&self.src[start..self.pos], 16).unwrap_or(u32::MAX);
        char::from_u32(v)
            .ok_or_else(|| self.error(format!("\\{e}{v:X} is not a Unicode character")))
    }
}

struct Expander<'g> {
    grammar: &'g Grammar,
    /// How many times each rule is being expanded on the current path.
    active: Vec<u32>,
    nesting: usize,
    max_depth: u32,
    out: String,
}

impl Expander<'_> {
    fn push(&mut self, s: &str) -> Result<(), ConstraintError> {
        if self.out.len() + s.len() > MAX_PATTERN {
            return Err(ConstraintError::TooLarge {
                what: "grammar as a regular expression (bytes; lower maxDepth or simplify recursive rules)",
                needed: (self.out.len() + s.len()) as u64,
                limit: MAX_PATTERN as u64,
            });
        }
        self.out.push_str(s);
        Ok(())
    }

    /// Writes rule `i`'s expansion; false (and nothing written) when it matches nothing here:
    /// every path through it needs a reference deeper than `max_depth`.
    fn rule(&mut self, i: usize) -> Result<bool, ConstraintError> {
        if self.active[i] > self.max_depth {
            return Ok(false);
        }
        if self.nesting == MAX_EXPANSION_NESTING {
            return Err(ConstraintError::TooLarge {
                what: "rule references expanded within each other",
                needed: MAX_EXPANSION_NESTING as u64 + 1,
                limit: MAX_EXPANSION_NESTING as u64,
            });
        }
        let grammar = self.grammar;
        let body = grammar.rules[i].as_ref().expect("checked by Grammar::root");
        self.active[i] += 1;
        self.nesting += 1;
        let matches = self.group(|e| e.node(body))?;
        self.nesting -= 1;
        self.active[i] -= 1;
        Ok(matches)
    }

    /// `(?:…)` around what `inner` writes, or nothing when it matches nothing.
    fn group(
        &mut self,
        inner: impl FnOnce(&mut Self) -> Result<bool, ConstraintError>,
    ) -> Result<bool, ConstraintError> {
        let mark = self.out.len();
        self.push("(?:")?;
        if !inner(self)? {
            self.out.truncate(mark);
            return Ok(false);
        }
        self.push(")")?;
        Ok(true)
    }

    /// Writes `node`; false (and nothing written) when it matches nothing. Only languages
    /// that are not empty are written, so every prefix the DFA accepts can be completed.
    fn node(&mut self, node: &Node) -> Result<bool, ConstraintError> {
        match node {
            Node::Literal(s) => {
                let mut text = String::new();
                for c in s.chars() {
                    push_char(&mut text, c);
                }
                self.push(&text)?;
            }
            Node::Class { negated, ranges } => {
                if ranges.is_empty() {
                    if !negated {
                        return Ok(false);
                    }
                    self.push("(?s:.)")?;
                    return Ok(true);
                }
                let mut text = String::from(if *negated { "[^" } else { "[" });
                for &(lo, hi) in ranges {
                    push_char(&mut text, lo);
                    if hi != lo {
                        text.push('-');
                        push_char(&mut text, hi);
                    }
                }
                text.push(']');
                self.push(&text)?;
            }
            Node::Any => self.push("(?s:.)")?,
            Node::Rule(i) => return self.rule(*i),
            Node::Seq(items) => {
                return self.group(|e| {
                    for item in items {
                        if !e.node(item)? {
                            return Ok(false);
                        }
                    }
                    Ok(true)
                })
            }
            Node::Alt(alts) => {
                return self.group(|e| {
                    let mut any = false;
                    for alt in alts {
                        let mark = e.out.len();
                        if any {
                            e.push("|")?;
                        }
                        if e.node(alt)? {
                            any = true;
                        } else {
                            e.out.truncate(mark);
                        }
                    }
                    Ok(any)
                })
            }
            Node::Repeat { node, min, max } => {
                let mark = self.out.len();
                if !self.group(|e| e.node(node))? {
                    // Zero repetitions of nothing is the empty text.
                    self.out.truncate(mark);
                    return Ok(*min == 0);
                }
                let count = match max {
                    Some(max) if max == min => format!("{{{min}}}"),
                    Some(max) => format!("{{{min},{max}}}"),
                    None => format!("{{{min},}}"),
                };
                self.push(&count)?;
            }
        }
        Ok(true)
    }
}

/// `c` as a regex escape that means that character wherever it stands.
fn push_char(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        let _ = write!(out, "\\x{{{:X}}}", c as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constraint::byte_dfa::ByteDfa;

    fn dfa(g: &str) -> ByteDfa {
        ByteDfa::new(&gbnf_regex(g, 5).unwrap()).unwrap()
    }

    fn check(g: &str, ok: &[&str], bad: &[&str]) {
        let d = dfa(g);
        for s in ok {
            assert!(d.matches(s.as_bytes()), "{s:?} should match {g}");
        }
        for s in bad {
            assert!(!d.matches(s.as_bytes()), "{s:?} should not match {g}");
        }
    }

    fn err(g: &str) -> String {
        gbnf_regex(g, 5).unwrap_err().to_string()
    }

    #[test]
    fn literals_classes_repetition_and_rules() {
        let arithmetic = "root  ::= expr\nexpr  ::= term ([-+*/] term)*\nterm  ::= num | \"(\" space expr \")\" space\nnum   ::= [0-9]+ space\nspace ::= [ \\t\\n]*\n";
        check(
            arithmetic,
            &["1", "1+2", "(1+2)*3 ", "((4))", "12 /(3 -4)"],
            &["", "+", "1+", "(1", "a"],
        );
        check(
            "root ::= \"a\"{2} \"b\"{1,3} \"c\"{2,} [^\\n\\x41] .",
            &["aabcc-x", "aabbbccc\u{e9}\n"],
            &["abcc-x", "aabbbbcc-x", "aabc-x", "aabccAx", "aabcc\nx"],
        );
        // Escapes, a dash at a class's end, an empty alternative, comments and continued lines.
        check(
            "# greeting\nroot ::= \"\\\"\\u00e9\\\\\" [a-] sep? (\n  \"x\" |\n  \"y\" # either\n)\nsep ::= | \",\"\n",
            &["\"\u{e9}\\ax", "\"\u{e9}\\-,y"],
            &["\"\u{e9}\\bx", "\"\u{e9}\\a,,x"],
        );
    }

    #[test]
    fn recursion_is_unrolled_max_depth_levels() {
        let list = "root ::= list\nlist ::= \"[\" (list (\",\" list)*)? \"]\"\n";
        let d = ByteDfa::new(&gbnf_regex(list, 2).unwrap()).unwrap();
        for ok in ["[]", "[[]]", "[[[]],[]]"] {
            assert!(d.matches(ok.as_bytes()), "{ok}");
        }
        assert!(!d.matches(b"[[[[]]]]"), "4 levels with maxDepth 2");
        assert!(!d.matches(b"[[[]]"));
        // What only a deeper level could finish is not started: after "[[[" only "]" follows.
        let after = d.walk(d.start, b"[[[");
        for b in 0..=255u8 {
            let next = d.trans[(after * d.n_classes + u32::from(d.classes[b as usize])) as usize];
            assert_eq!(
                next != crate::constraint::byte_dfa::DEAD,
                b == b']',
                "{:?}",
                b as char
            );
        }
        // A grammar that only recursion could end matches nothing at any depth.
        let e = err("root ::= \"(\" root \")\"\n");
        assert!(e.contains("nothing valid fits in maxDepth 5"), "{e}");
    }

    #[test]
    fn malformed_grammars_say_where() {
        for (g, want) in [
            ("root ::= foo\n", "rule \"foo\" is used but never defined"),
            ("start ::= \"a\"\n", "no rule named \"root\""),
            ("root \"a\"\n", "line 1, column 6: expected ::="),
            ("root ::= \"a\nx ::= \"b\"", "not closed"),
            ("root ::= [z-a]", "runs backwards"),
            ("root ::= \"\\q\"", "unknown escape"),
            ("root ::= \"a\"\nroot ::= \"b\"", "defined twice"),
            ("root ::= * \"a\"", "follows nothing"),
            ("root ::= \"a\"{3,1}", "runs backwards"),
            ("root ::= 'a'", "double quotes"),
            ("root ::= <[1]>", "token references"),
            ("root ::= (\"a\"\n", "expected )"),
            ("root ::= \"a\" ) ", "expected the end of the line"),
            ("", "no rules"),
        ] {
            let e = err(g);
            assert!(e.contains(want), "{g:?}: {e}");
        }
    }

    #[test]
    fn hostile_grammars_end_in_typed_errors() {
        // Each rule doubles the previous one: 2^40 copies unrolled.
        let mut g = String::from("root ::= r0\n");
        for i in 0..40 {
            writeln!(g, "r{i} ::= r{} r{}", i + 1, i + 1).unwrap();
        }
        g.push_str("r40 ::= \"x\"\n");
        let t = std::time::Instant::now();
        assert!(err(&g).contains("grammar as a regular expression"));
        // A chain of 1,000 rules, and 100 nested groups.
        let mut chain = String::from("root ::= r0\n");
        for i in 0..1000 {
            writeln!(chain, "r{i} ::= \"a\" r{}", i + 1).unwrap();
        }
        chain.push_str("r1000 ::= \"b\"\n");
        assert!(err(&chain).contains("rule references expanded within each other"));
        let nested = format!("root ::= {}\"a\"{}", "(".repeat(100), ")".repeat(100));
        assert!(err(&nested).contains("nested deeper than 64"));
        assert!(err(&"#".repeat(MAX_SOURCE + 1)).contains("grammar source"));
        assert!(t.elapsed().as_secs() < 5, "{:?}", t.elapsed());
    }
}
