//! Renders a model's chat template (`tokenizer.chat_template`, Jinja) into the prompt
//! text, the way Hugging Face's `apply_chat_template` does: a Jinja environment with
//! `trim_blocks` and `lstrip_blocks` on, Python string/dict methods (`.strip()`,
//! `.items()`, ... via minijinja-contrib's pycompat), `raise_exception(msg)`, and the
//! variables `messages`, `add_generation_prompt`, `bos_token`, `eos_token`.
//!
//! Rendering never panics: a template with a syntax error fails in [`ChatTemplate::new`],
//! one that raises or errors at run time fails in [`ChatTemplate::render`], both as a
//! typed [`TemplateError`].
//!
//! A template is a program from the model file, so a render is bounded: at most
//! [`TEMPLATE_FUEL`] fuel (minijinja 3.1's fuel: one per instruction and one per 64 bytes of
//! data the render produces, so a macro that calls itself twice per level, loops nested 10⁴
//! deep, or a string doubled with `~` 40 times stop with [`TemplateError::Budget`]: at most
//! ~2M instructions and 128 MB of data), [`TEMPLATE_RECURSION`] levels of nesting, and an
//! output of the caller's size ([`ChatTemplate::render_limited`]: the text model passes what
//! its context could hold), checked as the output is written ([`TemplateError::TooLong`]).
//! The builtins whose result can dwarf their inputs (`indent`, `replace`, `join`, `format`,
//! `tojson`, `pprint` and pycompat's `.replace`/`.join`/`.format`) check its size against the
//! same limit before they run (`bounded.rs`), and `+` on lists stops at 2^20 items (a patch
//! of the vendored minijinja, `vendor/README.md`). The hostile corpus
//! (`tests/hostile/templates/`) holds one template per attack.

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Value;
use minijinja::{context, Environment, ErrorKind};
use serde::{Deserialize, Serialize};

/// One chat turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct ChatMessage {
    /// "system", "user" or "assistant" (templates may accept others).
    #[cfg_attr(
        target_arch = "wasm32",
        tsify(type = "\"system\" | \"user\" | \"assistant\" | (string & {})")
    )]
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// Why a chat template could not be compiled or rendered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The template source is not valid Jinja.
    #[error("chat template syntax error: {0}")]
    Syntax(String),
    /// The template called `raise_exception(message)`, e.g. on an unsupported role.
    #[error("chat template raised: {0}")]
    Raised(String),
    /// Any other failure while rendering (unknown filter, bad operation, ...).
    #[error("chat template render error: {0}")]
    Render(String),
    /// The render ran past its budget ([`TEMPLATE_FUEL`]: instructions and the data they make).
    #[error(
        "chat template ran past its budget of {fuel} fuel (one per instruction and per 64 \
         bytes of data: a template that loops without end or grows a string without bound)"
    )]
    Budget { fuel: u64 },
    /// The rendered prompt passed `limit` bytes (more text than the context can hold).
    #[error("chat template output passed {limit} bytes, more than the context can hold")]
    TooLong { limit: usize },
}

/// Fuel one render may use: one per instruction and one per 64 bytes of data produced
/// (strings, list slots, output). A 4,000-message chat of 1 MB through ChatML takes ~0.1M
/// (tests/chat_template.rs).
pub const TEMPLATE_FUEL: u64 = 2_000_000;

/// Nesting a render may reach (minijinja counts loops and conditions 1, macro calls more);
/// real templates nest a few levels.
pub const TEMPLATE_RECURSION: usize = 100;

/// The output bound of [`ChatTemplate::render`].
pub const DEFAULT_MAX_OUTPUT: usize = 64 << 20;

/// The message of a `raise_exception` call, carried as the source of minijinja's error
/// so that render can tell it apart from template bugs.
#[derive(Debug)]
struct Raised(String);

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Raised {}

const NAME: &str = "chat_template";

/// A compiled chat template.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

impl ChatTemplate {
    /// Compiles `source`. `bos_token`/`eos_token` are the token texts (e.g. from
    /// `Tokenizer::bos_text`), exposed to the template as in Hugging Face.
    pub fn new(
        source: &str,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<ChatTemplate, TemplateError> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| TemplateError::Syntax(e.to_string()))?;
        env.set_syntax(syntax);
        env.set_fuel(Some(TEMPLATE_FUEL));
        env.set_recursion_limit(TEMPLATE_RECURSION);
        env.set_unknown_method_callback(super::bounded::method);
        super::bounded::install(&mut env);
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<Value, minijinja::Error> {
                Err(
                    minijinja::Error::new(ErrorKind::InvalidOperation, msg.clone())
                        .with_source(Raised(msg)),
                )
            },
        );
        env.add_template_owned(NAME, source.to_string())
            .map_err(|e| TemplateError::Syntax(describe(&e)))?;
        Ok(ChatTemplate {
            env,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        })
    }

    /// Renders the prompt for `messages`; `add_generation_prompt` appends the opening of
    /// the assistant's turn. At most [`DEFAULT_MAX_OUTPUT`] bytes.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        self.render_limited(messages, add_generation_prompt, DEFAULT_MAX_OUTPUT)
    }

    /// [`render`](Self::render) that stops with [`TemplateError::TooLong`] once the output
    /// passes `max_bytes`.
    pub fn render_limited(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        max_bytes: usize,
    ) -> Result<String, TemplateError> {
        let template = self
            .env
            .get_template(NAME)
            .map_err(|e| TemplateError::Render(describe(&e)))?;
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| context! { role => m.role.as_str(), content => m.content.as_str() })
            .collect();
        let ctx = context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
        };
        let mut out = Capped {
            buf: Vec::new(),
            limit: max_bytes,
            over: false,
        };
        match super::bounded::with_limit(max_bytes, || template.render_captured_to(ctx, &mut out)) {
            Ok(_) => String::from_utf8(out.buf)
                .map_err(|e| TemplateError::Render(format!("output is not UTF-8: {e}"))),
            Err(_) if out.over => Err(TemplateError::TooLong { limit: max_bytes }),
            Err(e) if super::bounded::is_too_big(&e) => {
                Err(TemplateError::TooLong { limit: max_bytes })
            }
            Err(e) if e.kind() == ErrorKind::OutOfFuel => Err(TemplateError::Budget {
                fuel: TEMPLATE_FUEL,
            }),
            Err(e) => Err(match raised_message(&e) {
                Some(msg) => TemplateError::Raised(msg),
                None => TemplateError::Render(describe(&e)),
            }),
        }
    }
}

/// The render's output, refusing to grow past `limit` bytes.
struct Capped {
    buf: Vec<u8>,
    limit: usize,
    over: bool,
}

impl std::io::Write for Capped {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.buf.len().saturating_add(bytes.len()) > self.limit {
            self.over = true;
            return Err(std::io::Error::other("chat template output limit"));
        }
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The `raise_exception` message anywhere in the error's source chain.
fn raised_message(err: &minijinja::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(r) = e.downcast_ref::<Raised>() {
            return Some(r.0.clone());
        }
        source = e.source();
    }
    None
}

/// The error with its line, when minijinja knows it.
fn describe(err: &minijinja::Error) -> String {
    match err.line() {
        Some(line) => format!("{err} (line {line})"),
        None => err.to_string(),
    }
}
