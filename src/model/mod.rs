//! Models: loading a GGUF file into a runnable model, and the CPU reference forward pass.

pub mod cpu_reference;
pub mod vocab;

pub use cpu_reference::CpuReferenceModel;
pub use vocab::{chat_template_from, tokenizer_from_gguf, vocab_spec};
