//! The four dispatches of one transformer layer in a fused decode step (one token).
//!
//! | dispatch | WGSL | work | workgroups |
//! |---|---|---|---|
//! | 1 | `fused_qkv` | RMS norm, Q/K/V projections, RoPE | (n_q + 2 n_kv) / (256 / lanes) |
//! | 2 | `fused_attention` | attention over a chunk for 1–4 query heads of a KV group, their output projection (KV append with QK_NORM) | n_head / heads × chunks × row blocks |
//! | 3 | `fused_ffn_up` | attention combine + residual, RMS norm, gate/up, SwiGLU | n_ff / (256 / lanes × [`ffn_up_passes`]) |
//! | 4 | `fused_ffn_down` | down projection + residual, KV append (without QK_NORM) | n_embd / (256 / lanes × [`down_rows_per_lane`]) |
//!
//! Where the attention partials are large ([`o_split`]: MHA models at 3,072 wide), steps that
//! fit one attention chunk run the output projection as a dispatch of its own between 2 and 3
//! (`fused_o_proj`, `o_proj.rs`: attention writes only the heads' outputs, gate/up reads
//! `x_mid`).
//!
//! One file per dispatch (`qkv.rs`, `attention.rs`, `ffn_up.rs`, `ffn_down.rs`, and
//! `post_norm.rs` for the step's last norm), the geometry and architecture switches they are
//! compiled for in `shape.rs`, and what they share in files of their own: the fixed sizes of
//! their WGSL (`limits.rs`), lanes per row (`lanes.rs`), the vector arena's checks
//! (`vectors.rs`), the KV cache binding (`kv_cache.rs`) and the bound call (`call.rs`). This
//! file only declares and re-exports them.
//!
//! Each grid's x extent carries the layer on top (`layer` extra columns that return at once:
//! [`LayerIndexing`]), so one bind group per role serves every layer whose weights are stacked,
//! and dispatch `k` of a layer binds at group index `k - 1`.
//!
//! Architectures beyond plain llama blocks ([`FusedArch`]) keep the four dispatches: Q/K/V
//! biases ride in `fused_qkv`; per-head Q/K norms move RoPE into `fused_attention` (which holds
//! whole heads); a post-attention norm is applied where `fused_ffn_up` rebuilds the attention
//! output; a post-FFN norm is deferred to the next consumer (`fused_ffn_down` writes the
//! residual as base and delta, the next layer's kernels normalise delta as they read it, and
//! [`FusedPostNorm`] does it once per step before the head). Their vectors (norm weights,
//! biases) live in one arena buffer ([`LayerVectors`] gives the offsets), so no kernel needs
//! more than WebGPU's default 8 storage bindings.
//!
//! Why this split: a dispatch boundary is needed wherever every output depends on every
//! output of the previous stage — after Q/K/V (attention needs the whole head), after
//! attention, after the residual (the norm needs all of it), after gate/up (down needs all of
//! it) and after down (the next norm). That is five; the output projection is moved into the
//! attention dispatch (each head-chunk projects its own unnormalised output — linear, so the
//! softmax normalisation is applied afterwards, when dispatch 3 sums the partials), which
//! removes one boundary without recomputing anything. Norms are recomputed per output row
//! (their sum of squares rides along in the row's reduction) instead of costing a dispatch.
//!
//! How each kernel keeps its latency low (at batch 1 they are latency-bound: a step's
//! weights are ~100 KiB–1 MiB per dispatch, far below what the memory bus moves in a
//! microsecond): the model's dims are WGSL constants ([`FusedShape::wgsl_prelude`]), so
//! loops over a row unroll and every invocation issues all of its weight loads first; the
//! RMS norm's scale is applied after the dot products (it is a scalar), so `sum(x^2)` comes
//! out of the same row reduction and no workgroup normalises x before using it; each output
//! row is spread over [`lanes_for`] lanes, which reduce with subgroup operations when the
//! adapter's subgroups are exactly 32 wide (`shaders/reduce_subgroup.wgsl`), else through
//! workgroup memory (`reduce_shared.wgsl`). Measurements behind these choices:
//! `bench/NOTES.md`.

mod attention;
mod call;
mod ffn_down;
mod ffn_up;
mod kv_cache;
mod lanes;
mod limits;
mod o_proj;
mod post_norm;
mod qkv;
mod shape;
mod vectors;

pub use attention::{attention_preloads, AttentionParams, FusedAttention, FusedAttentionCall};
pub use call::FusedCall;
pub use ffn_down::{down_rows_per_lane, FusedFfnDown};
pub use ffn_up::{
    ffn_up_lanes, ffn_up_passes, ffn_up_precombine, FfnUpParams, FusedFfnUp, FusedFfnUpCall,
};
pub use lanes::lanes_for;
pub use limits::{
    ATTENTION_CHUNK, ATTENTION_GROUPED_FLOATS, ATTENTION_MAX_BLOCK_ROWS, ATTENTION_MIN_GROUPS,
    MAX_EMBD, MAX_HEAD_CHUNKS, MAX_HEAD_DIM, PRECOMBINE_FLOATS, WORKGROUP,
};
pub use o_proj::{o_proj_launch, o_split, FusedOProj};
pub use post_norm::FusedPostNorm;
pub use qkv::{qkv_passes, FusedQkv, QkvParams};
pub use shape::{FusedArch, FusedShape, LayerAttention, LayerVectors};
pub use vectors::NO_VECTOR;

pub use super::layer_indexing::{uniform_array, LayerIndexing};
