//! The four dispatches of one transformer layer in a fused decode step (one token).
//!
//! | dispatch | WGSL | work | workgroups |
//! |---|---|---|---|
//! | 1 | `fused_qkv` | RMS norm, Q/K/V projections, RoPE | (n_q + 2 n_kv) / (256 / lanes) |
//! | 2 | `fused_attention` | attention over a chunk for 1–4 query heads of a KV group, their output projection (KV append with QK_NORM) | n_head / heads × chunks × row blocks |
//! | 3 | `fused_ffn_up` | attention combine + residual, RMS norm, gate/up, SwiGLU | n_ff / (256 / lanes × [`ffn_up_passes`]) |
//! | 4 | `fused_ffn_down` | down projection + residual, KV append (without QK_NORM) | n_embd / (256 / lanes × [`down_rows_per_lane`]) |
//!
//! One file per dispatch (`qkv.rs`, `attention.rs`, `ffn_up.rs`, `ffn_down.rs`, and
//! `post_norm.rs` for the step's last norm), the geometry and architecture switches they are
//! compiled for in `shape.rs`, and what they share (lanes per row, vector checks) here.
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
mod ffn_down;
mod ffn_up;
mod post_norm;
mod qkv;
mod shape;

pub use attention::{attention_preloads, AttentionParams, FusedAttention, FusedAttentionCall};
pub use ffn_down::{down_rows_per_lane, FusedFfnDown};
pub use ffn_up::{ffn_up_passes, FfnUpParams, FusedFfnUp, FusedFfnUpCall};
pub use post_norm::FusedPostNorm;
pub use qkv::{FusedQkv, QkvParams};
pub use shape::{FusedArch, FusedShape, LayerAttention, LayerVectors};

pub use super::layer_indexing::{uniform_array, LayerIndexing};
use super::{check_buffer, require, Bound, BufferView, PassState, Res};
use crate::error::Result;
use crate::gpu::GpuContext;

/// Invocations per workgroup of the fused kernels (`WG`).
pub const WORKGROUP: u32 = 256;
/// Largest n_embd the fused kernels keep in workgroup memory.
pub const MAX_EMBD: u32 = 2048;
/// Key positions per attention workgroup (`CHUNK` in fused_attention.wgsl).
pub const ATTENTION_CHUNK: u32 = 256;
/// Workgroups the attention dispatch aims for (Wo's rows are split into blocks to reach it).
pub const ATTENTION_MIN_GROUPS: u32 = 64;
/// Most rows of Wo one attention workgroup projects, per query head it holds (more row blocks
/// beyond that).
pub const ATTENTION_MAX_BLOCK_ROWS: u32 = 512;
/// Size of the attention partials (n_head × n_embd floats) from which `fused_attention` groups
/// query heads per workgroup ([`FusedShape::attention_heads_per_group`]).
pub const ATTENTION_GROUPED_FLOATS: u32 = 16384;
/// Largest `n_head × chunks` (chunks = nCtx / 256) whose merge weights fused_ffn_up.wgsl keeps
/// in workgroup memory (4 KiB, within WebGPU's default 16 KiB with its other arrays).
pub const MAX_HEAD_CHUNKS: u32 = 1024;
/// Largest head_dim of fused_attention.wgsl.
pub const MAX_HEAD_DIM: u32 = 256;

/// Offset of an absent vector in [`LayerVectors`] (`NONE` in WGSL).
pub const NO_VECTOR: u32 = u32::MAX;

/// Lanes (invocations) per output row of a fused matrix-vector kernel whose rows have `units`
/// 8-value units: the fewest powers of two from 32 up to `max` that leave each lane at most
/// two units. At batch 1 these kernels are bound by each warp's chain of dependent
/// instructions, not by memory (a workgroup per SM leaves nothing to hide latency with), so
/// spreading a row over more lanes shortens every warp's work; a row wider than one subgroup
/// costs one extra barrier to combine. `tuned` (`KernelTuning::lanes`) overrides it, to
/// measure the alternatives on one device.
pub fn lanes_for(units: u32, max: u32, tuned: Option<u32>) -> u32 {
    if let Some(l) = tuned {
        return l.min(max);
    }
    let mut lanes = 32;
    while lanes < max && units > 2 * lanes {
        lanes *= 2;
    }
    lanes
}

/// A layer's KV cache as a binding: the whole stacked buffer when one bind group serves every
/// layer (the kernel adds `kv_base`), else the layer's view.
fn cache_res(v: &BufferView, stacked: bool) -> Res<'_> {
    if stacked {
        (&v.buffer).into()
    } else {
        v.into()
    }
}

/// Whether a step that sees at most `max_len` positions records the single-chunk variants of
/// `fused_attention` and `fused_ffn_up` (one rule for both, so they switch together).
fn single_chunk(max_len: u32) -> bool {
    max_len <= ATTENTION_CHUNK
}

/// A bound fused dispatch with a fixed grid.
#[derive(Debug, Clone)]
pub struct FusedCall {
    bound: Bound,
    groups: [u32; 3],
}

impl FusedCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.bound.dispatch(pass, self.groups);
    }

    /// Records layer `layer` of a layer kernel.
    pub fn record_at(&self, pass: &mut wgpu::ComputePass<'_>, layer: u32) {
        let [x, y, z] = self.groups;
        self.bound.dispatch(pass, [x + layer, y, z]);
    }

    /// [`FusedCall::record_at`], setting only what `state` says is not set.
    pub(crate) fn record_layer<'a>(
        &'a self,
        pass: &mut wgpu::ComputePass<'_>,
        state: &mut PassState<'a>,
        layer: u32,
    ) {
        let [x, y, z] = self.groups;
        self.bound.dispatch_tracked(pass, state, [x + layer, y, z]);
    }
}

/// Length a vector must have when its switch is on, or 0 (not read) when it is off.
fn flag_len(on: bool, len: u32) -> u32 {
    if on {
        len
    } else {
        0
    }
}

/// Every (offset, length) a kernel will read from the vector arena must lie within it and be
/// vec4-aligned; length 0: not read (its offset is ignored).
fn check_vectors(ctx: &GpuContext, vecs: &wgpu::Buffer, wanted: &[(u32, u32)]) -> Result<()> {
    for &(off, len) in wanted {
        if len == 0 {
            continue;
        }
        require(
            off != NO_VECTOR && off % 4 == 0,
            "fused kernels: a vector the architecture needs is missing from the arena",
        )?;
        check_buffer(
            ctx,
            "fused vector arena",
            vecs,
            u64::from(off) + u64::from(len),
        )?;
    }
    Ok(())
}
