//! Models: a GGUF file loaded onto the GPU and run, plus the CPU reference forward pass it is
//! tested against, and the bridge from GGUF metadata to the tokenizer.

mod activations;
pub mod bench;
pub mod cpu_reference;
mod fused_step;
mod generation;
mod gpu_model;
mod gpu_weights;
mod profile;
mod step;
pub mod synthetic;
mod text_model;
pub mod vocab;

pub use cpu_reference::CpuReferenceModel;
pub use generation::{GenerationRequest, Strategy, TokenGeneration, DEFAULT_CHUNK_TOKENS};
pub use gpu_model::{GpuModel, LoadOptions, StopReason};
pub use profile::{RoleProfile, StepProfile};
pub use text_model::{GenerateOptions, GenerateResult, GenerateTimings, TextModel};
pub use vocab::{chat_template_from, tokenizer_from_gguf, vocab_spec};
