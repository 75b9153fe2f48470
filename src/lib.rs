//! fuselm: fused LLM text generation on the user's GPU, through WebGPU in browsers and wgpu
//! (Vulkan/Metal/DX12) natively.
//!
//! The native core (everything but `web`) has no wasm-bindgen; the JS facade in `web` is
//! compiled only for wasm32, with the few browser calls the core makes there (`web::sys`:
//! clock, adapter info, subgroups). See ARCHITECTURE.md for the map.

pub mod chat_template;
pub mod clock;
pub mod constraint;
pub mod error;
pub mod gguf;
pub mod gpu;
pub mod kernels;
pub mod model;
pub mod probe;
pub mod reference;
pub mod sampling;
pub mod shaders;
pub mod sim;
pub mod tokenizer;

#[cfg(target_arch = "wasm32")]
pub mod web;

pub use error::{FuselmError, Result};
pub use probe::{probe, probe_adapter, AdapterReport, ProbeOptions};
