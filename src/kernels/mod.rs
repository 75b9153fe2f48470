//! The compute kernels of the Llama forward pass, each one Rust type that owns its contract.
//!
//! # Shape of a kernel
//! Every kernel is built once per variant (`X::new(ctx, ...)`, which compiles its WGSL and
//! creates its pipeline with an *explicit* bind-group layout) and then bound to buffers any
//! number of times (`x.bind(ctx, ...)` → an `XCall` owning its uniform buffer and bind
//! group(s), after checking buffer sizes and limits). `XCall::record(&mut pass, ...)` only
//! sets the pipeline and bind group and dispatches, so a whole forward pass — and later a
//! whole generation — is recorded into one `wgpu::ComputePass` the caller owns.
//!
//! # Binding conventions
//! In every kernel, `@group(0)`: binding 0 is the kernel's uniform `Params` (shape constants
//! written once at bind time: dims, eps, rope base), binding 1 the `state` buffer when the
//! kernel reads it, then the inputs, then the outputs (`read_write`). Each `Params` is a
//! `#[repr(C)]` bytemuck struct whose size is asserted at compile time and mirrored field for
//! field (same order, 16-byte multiple) by the `Params` struct at the top of its WGSL file.
//! Activations are f32, row-major `[n_tokens, dim]`. The fused layer kernels are the exception
//! ([`fused_layer::LayerIndexing`]): their bindings move to `@group(1..3)` by role (qkv stays in
//! 0), binding 0 is an array of per-layer `Params`, and a binding may be a [`BufferView`]
//! (one layer's slice of a stacked buffer) or the whole stack.
//!
//! # The `state` buffer: nothing per token comes from the CPU
//! Per-token inputs live in GPU buffers, never in uniforms written between dispatches:
//! * `state` ([`DecodeState`], 16 bytes, STORAGE): `pos` (first position of this step =
//!   tokens already in the KV cache) and `n_tokens` (tokens in this step: the prompt length
//!   when prefilling, 1 when decoding). Kernels read it; [`Advance`] moves it on
//!   (`pos += n_tokens; n_tokens = 1`).
//! * `tokens` (`[n_ctx]` u32, one id per position): the host writes the prompt at
//!   `0..n`; [`Embed`] reads `tokens[pos + t]`; [`Argmax`] writes `tokens[pos + n_tokens]`.
//! * the KV cache (`[n_head_kv, n_ctx, head_dim]` per layer for K and for V; f32, or f16
//!   when the device has SHADER_F16 and the caller asks for [`KvFormat::F16`]):
//!   [`KvStore`] writes rows `pos..pos + n_tokens`, [`Attention`] reads `0..=pos + t`.
//!
//! Dispatch sizes are fixed at record time from the token count the host passes (1 for
//! decode); kernels bound-check against `state.n_tokens` so a grid may be larger than needed.
//!
//! # Weights
//! Weights stay in their ggml format on the GPU ([`weights`]): each format has a small WGSL
//! decoder (`weights_<format>.wgsl`, defining `w_load8`) that is prepended to the kernel that
//! reads weights ([`Embed`], [`MatVec`], [`MatMul`]), so one kernel file serves every format.
//! A weight larger than a storage binding is split by rows into chunks; the calls record one
//! dispatch per chunk.
//!
//! # Shared machinery
//! What every kernel uses lives in modules of its own, imported by their paths: `pipeline`
//! (`Pipeline`, `Bound`, `PassState`, `compose`), `binding` ([`BufferView`], [`Res`],
//! [`stack_views`]), `checks` (the argument checks of `bind`) and `dispatch` (grids within the
//! device's limits). This file only declares the kernels and re-exports their public API.

mod add;
mod argmax;
mod attention;
pub(crate) mod binding;
pub(crate) mod checks;
pub mod constraint;
pub(crate) mod dispatch;
mod embed;
pub mod fused_layer;
mod kv_shift;
mod kv_store;
mod layer_indexing;
pub mod logprobs;
mod matmul;
mod matvec;
pub mod megakernel;
pub(crate) mod pipeline;
mod rms_norm;
mod rope;
pub mod sample;
mod state;
mod swiglu;
pub mod tuning;
pub mod weights;

pub use add::{Add, AddCall};
pub use argmax::{Argmax, ArgmaxCall};
pub use attention::{
    Attention, AttentionCall, AttentionMask, AttentionShape, KvFormat, Tile, TILED_FROM_TOKENS,
};
pub use binding::{stack_views, BufferView, Res};
pub use embed::{Embed, EmbedCall};
pub use fused_layer::{
    FusedArch, FusedAttention, FusedAttentionCall, FusedCall, FusedFfnDown, FusedFfnUp,
    FusedFfnUpCall, FusedPostNorm, FusedQkv, FusedShape, LayerAttention, LayerIndexing,
    LayerVectors, NO_VECTOR,
};
pub use kv_shift::{KvShift, KvShiftCall, ShiftRegion, ShiftRotation, ShiftRows};
pub use kv_store::{KvStore, KvStoreCall};
pub use matmul::{MatMul, MatMulCall, WIDE_FROM_GROUPS};
pub use matvec::{MatVec, MatVecCall};
pub use rms_norm::{RmsNorm, RmsNormCall, RmsRows};
pub use rope::{Rope, RopeCall, RopeExtension, RopeStyle};
pub use sample::{HeadLogits, HeadLogitsCall, SampleCall, SampleChoose, SampleSelect};
pub use state::{Advance, AdvanceCall, DecodeState};
pub use swiglu::{ElementwiseCall, SwiGlu, SwiGluCall};
pub use tuning::KernelTuning;
pub use weights::{GpuWeight, LayerStacks, WeightFormat};
