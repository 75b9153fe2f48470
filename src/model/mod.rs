//! Models: a GGUF file loaded onto the GPU and run, plus the CPU reference forward pass it is
//! tested against, and the bridge from GGUF metadata to the tokenizer.

pub(crate) mod activations;
pub mod bench;
mod calibration;
mod chunk_ramp;
mod context_shift;
pub mod cpu_reference;
mod fused_step;
mod generation;
mod gpu_model;
mod gpu_weights;
mod loader;
mod megakernel;
mod memory;
pub mod prefill_bench;
mod profile;
mod session;
mod shared;
mod step;
mod stop_text;
mod strategy;
pub mod synthetic;
mod text_model;
pub mod vocab;

pub use calibration::{CalibrateOptions, Calibration, CalibrationRun};
pub use context_shift::{tokens_to_drop, ContextShift};
pub use cpu_reference::CpuReferenceModel;
pub use generation::{StopReason, TokenGeneration, DEFAULT_CHUNK_TOKENS};
pub use gpu_model::{estimate_memory, GenerationRequest, GpuModel, LoadOptions, QuantUse};
pub use loader::{LoadStatus, ModelLoader};
pub use memory::{MemoryBudget, MemoryUse, OTHER_ALLOWANCE};
pub use profile::{RoleProfile, StepProfile};
pub use session::SessionInfo;
pub use stop_text::StopText;
pub use strategy::Strategy;
pub use text_model::{
    GenerateOptions, GenerateResult, GenerateTimings, PreparedFormat, Prompt, TextModel,
};
pub use vocab::{chat_template_from, tokenizer_from_gguf, vocab_spec};
