//! Chat templates: a model's Jinja template rendered into the prompt text, bounded in
//! instructions, nesting and the bytes it may build (`template.rs`; the checked builtins in
//! `bounded.rs`).

mod bounded;
mod template;

pub use template::{
    ChatMessage, ChatTemplate, TemplateError, DEFAULT_MAX_OUTPUT, TEMPLATE_FUEL, TEMPLATE_RECURSION,
};
