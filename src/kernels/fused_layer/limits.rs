//! The fixed sizes the fused kernels' WGSL is written for (workgroup size, what fits in
//! workgroup memory, attention chunking), and the rule that picks the single-chunk variants.

/// Invocations per workgroup of the fused kernels (`WG`).
pub const WORKGROUP: u32 = 256;
/// Largest n_embd of the fused kernels: a bound on the 8-value units of a row each lane holds in
/// registers (`n_embd / 8 / lanes`: 16 at 8192 wide with fused_ffn_up's 64 lanes). Below it,
/// what decides is workgroup memory
/// (`fused_ffn_up` keeps the whole residual there: [`FusedShape::workgroup_bytes`](super::FusedShape::workgroup_bytes)
/// against the device's `maxComputeWorkgroupStorageSize`).
pub const MAX_EMBD: u32 = 8192;
/// Key positions per attention workgroup (`CHUNK` in fused_attention.wgsl).
pub const ATTENTION_CHUNK: u32 = 256;
/// Workgroups the attention dispatch aims for (Wo's rows are split into blocks to reach it).
pub const ATTENTION_MIN_GROUPS: u32 = 64;
/// Most rows of Wo one attention workgroup projects, per query head it holds (more row blocks
/// beyond that).
pub const ATTENTION_MAX_BLOCK_ROWS: u32 = 512;
/// Size of the attention partials (n_head × n_embd floats) from which `fused_attention` groups
/// query heads per workgroup ([`FusedShape::attention_heads_per_group`](super::FusedShape::attention_heads_per_group)).
pub const ATTENTION_GROUPED_FLOATS: u32 = 16384;
/// Largest `n_head × chunks` (chunks = nCtx / 256) whose merge weights fused_ffn_up.wgsl keeps
/// in workgroup memory (4 KiB, within WebGPU's default 16 KiB with its other arrays).
pub const MAX_HEAD_CHUNKS: u32 = 1024;
/// Attention-partial floats per `fused_ffn_up` workgroup from which the combine is split off
/// (`ffn_up_precombine`), and from which single-chunk steps project the attention output in a
/// dispatch of its own (`o_split`).
pub const PRECOMBINE_FLOATS: u64 = 1 << 16;
/// Largest head_dim of fused_attention.wgsl.
pub const MAX_HEAD_DIM: u32 = 256;

/// Whether a step that sees at most `max_len` positions records the single-chunk variants of
/// `fused_attention` and `fused_ffn_up` (one rule for both, so they switch together).
pub(super) fn single_chunk(max_len: u32) -> bool {
    max_len <= ATTENTION_CHUNK
}
