//! The model geometry and architecture switches the fused kernels are compiled for (their WGSL
//! constants).

use super::limits::{
    ATTENTION_CHUNK, ATTENTION_GROUPED_FLOATS, MAX_EMBD, MAX_HEAD_CHUNKS, MAX_HEAD_DIM, WORKGROUP,
};
use crate::error::{FuselmError, Result};
use crate::gpu::GpuContext;
use crate::kernels::checks::require;
use crate::kernels::tuning::KernelTuning;
use crate::shaders;

/// The architecture switches of the fused kernels (WGSL constants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FusedArch {
    /// Q/K/V biases (`QKV_BIAS`: qwen2).
    pub qkv_bias: bool,
    /// Output-projection bias (`O_BIAS`).
    pub o_bias: bool,
    /// Per-head Q/K RMS norms (`QK_NORM`: qwen3, gemma3).
    pub qk_norm: bool,
    /// Norms of the attention and FFN outputs (`POST_NORMS`: gemma3).
    pub post_norms: bool,
    /// GELU-tanh gate instead of SiLU (`GELU`: gemma3).
    pub gelu: bool,
}

/// Where one layer's vectors sit in the vector arena, in floats (multiples of 4), or
/// [`NO_VECTOR`](super::vectors::NO_VECTOR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerVectors {
    pub attn_norm: u32,
    pub ffn_norm: u32,
    /// Q, K and V biases, consecutive.
    pub qkv_bias: u32,
    pub o_bias: u32,
    pub q_norm: u32,
    pub k_norm: u32,
    pub post_attn_norm: u32,
    pub post_ffn_norm: u32,
    /// The previous layer's `post_ffn_norm`: the norm of the delta this layer's input carries.
    pub incoming_norm: u32,
    /// RoPE frequency factors (`[n_rot / 2]`, the same for every layer).
    pub rope_factors: u32,
}

/// One layer's attention settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerAttention {
    /// Score scale (1 / sqrt(head_dim) unless the model says otherwise).
    pub scale: f32,
    /// Visible positions of a sliding-window layer; `None`: all.
    pub window: Option<u32>,
    /// RoPE frequency base of this layer.
    pub rope_freq_base: f32,
    /// RoPE angle scale of this layer (1 / linear scaling factor; 1 on sliding-window layers).
    pub rope_freq_scale: f32,
    /// Multiplies RoPE's cos and sin (LongRoPE's attention factor; else 1).
    pub rope_mscale: f32,
}

/// The model geometry the fused kernels need.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FusedShape {
    pub n_embd: u32,
    pub n_ff: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    pub head_dim: u32,
    pub n_rot: u32,
    pub neox: bool,
    pub rope_freq_base: f32,
    pub eps: f32,
    /// KV cache capacity in positions.
    pub n_ctx: u32,
    pub arch: FusedArch,
    /// Measurement overrides of the launch parameters (the context's; default: none).
    pub tuning: KernelTuning,
    /// A software (CPU) adapter, where every workgroup's work is CPU time: launch rules that
    /// repeat work to fill a GPU's cores do not (see `attention_min_groups`), and the matrix
    /// kernels take the most rows per workgroup their knobs allow (`qkv_passes`,
    /// `ffn_up_passes`, `down_rows_per_lane`): a workgroup has a fixed cost there (SwiftShader,
    /// 2026-11-29: the 3-layer test model's fused qkv took 35 ms a dispatch over 32 workgroups,
    /// 15 ms over 2; fused decode 3.4 → 6.2 tokens/s; lavapipe, SmolLM2: −19% decode time).
    /// Every row's sum keeps its order, so the ids do not change.
    pub software: bool,
}

impl FusedShape {
    pub fn n_q(&self) -> u32 {
        self.n_head * self.head_dim
    }
    pub fn n_kv(&self) -> u32 {
        self.n_head_kv * self.head_dim
    }
    /// The `qkv` buffer's floats: Q, K and V of the step's token, then (with per-head Q/K
    /// norms, where `fused_attention` rotates) RoPE's (sin, cos) of each pair at the step's
    /// position, computed once by `fused_qkv`.
    pub fn qkv_len(&self) -> u32 {
        self.n_q() + 2 * self.n_kv() + if self.arch.qk_norm { self.n_rot } else { 0 }
    }
    /// Attention chunk slots per head (enough for the whole cache).
    pub fn max_chunks(&self) -> u32 {
        self.n_ctx.div_ceil(ATTENTION_CHUNK)
    }
    /// Query heads per `fused_attention` workgroup (`ATT_HG`). A workgroup's heads share each
    /// key and value row it loads, and at short contexts (one chunk) they sum their output
    /// projections into one partial, so every `fused_ffn_up` workgroup adds n_head / ATT_HG
    /// partials of n_embd floats instead of n_head; but each attention workgroup then runs
    /// ATT_HG heads' scores, softmax and value sums in its chain. Measured on an H200
    /// (bench/NOTES.md): at Llama-3.2-1B's width (32 heads × 2048, partials of 256 KiB per
    /// ffn_up workgroup) 4 heads per workgroup decode 5–9% faster; at SmolLM2's (9 × 576:
    /// 20 KiB) 3 heads cost 1–3%. So: 1 unless the partials are at least 64 KiB
    /// (n_head × n_embd ≥ [`ATTENTION_GROUPED_FLOATS`]); then the largest divisor of the KV
    /// group size that is at most 4 and keeps the heads' queries within 256 floats. Always 1
    /// with per-head Q/K norms (their normalise-and-rotate code holds one head).
    /// `KernelTuning::attention_heads_per_group` (a divisor of the group size, within the same
    /// bounds) overrides it for measurements.
    pub fn attention_heads_per_group(&self) -> u32 {
        if self.arch.qk_norm || self.n_head_kv == 0 || self.n_head % self.n_head_kv != 0 {
            return 1;
        }
        let group = self.n_head / self.n_head_kv;
        let fits = |d: u32| d <= 4 && group % d == 0 && d * self.head_dim <= 256;
        if let Some(d) = self
            .tuning
            .attention_heads_per_group
            .filter(|&d| d >= 1 && fits(d))
        {
            return d;
        }
        if self.n_head * self.n_embd < ATTENTION_GROUPED_FLOATS {
            return 1;
        }
        (1..=4).rev().find(|&d| fits(d)).unwrap_or(1)
    }
    /// Floats per row of the attention partials: n_embd values, then m and l, padded to a
    /// vec4 (`PART_STRIDE`).
    pub fn part_stride(&self) -> u32 {
        self.n_embd + 4
    }
    /// Floats of the attention partials buffer: `[n_head, max_chunks, part_stride]`.
    pub fn partials_len(&self) -> u64 {
        u64::from(self.n_head) * u64::from(self.max_chunks()) * u64::from(self.part_stride())
    }
    /// Floats of the residual stream between fused layers: n_embd, or base and delta
    /// (`POST_NORMS`).
    pub fn residual_len(&self) -> u64 {
        u64::from(self.n_embd) * if self.arch.post_norms { 2 } else { 1 }
    }
    /// RoPE's `theta_scale` for a layer whose base is `freq_base`.
    pub fn theta_scale(&self, freq_base: f32) -> f32 {
        freq_base.powf(-2.0 / self.n_rot as f32)
    }

    /// The WGSL that starts every fused kernel of this shape: `enable` directives (subgroups
    /// when [`GpuContext::subgroups32`]), `extra` (e.g. the KV element type, which may carry
    /// its own `enable`), the shape as constants, and the row reductions. Constants instead of
    /// uniforms let the driver unroll the loops over a row and issue all loads at once; the
    /// pipelines are built per model, so this costs nothing at run time.
    /// `lanes`: invocations per output row of the kernel (`LANES`, see [`lanes_for`](super::lanes::lanes_for)).
    pub fn wgsl_prelude(&self, ctx: &GpuContext, extra: &str, lanes: u32) -> String {
        let sg = ctx.subgroups32();
        format!(
            "{enable}{extra}
const LANES: u32 = {lanes}u;
const N_EMBD: u32 = {n_embd}u;
const N_FF: u32 = {n_ff}u;
const N_HEAD: u32 = {n_head}u;
const N_HEAD_KV: u32 = {n_head_kv}u;
const HEAD_DIM: u32 = {head_dim}u;
const N_ROT: u32 = {n_rot}u;
const NEOX: bool = {neox};
const N_CTX: u32 = {n_ctx}u;
const MAX_CHUNKS: u32 = {max_chunks}u;
const ATT_CHUNK: u32 = {chunk}u;
const ATT_HG: u32 = {att_hg}u;
const PART_STRIDE: u32 = {stride}u;
const QKV_BIAS: bool = {qkv_bias};
const O_BIAS: bool = {o_bias};
const QK_NORM: bool = {qk_norm};
const POST_NORMS: bool = {post_norms};
const GELU: bool = {gelu};
const QKN_LEN: u32 = {qkn_len}u;
const NONE: u32 = 0xffffffffu;
{reduce}",
            enable = if sg { ctx.subgroups_enable() } else { "" },
            n_embd = self.n_embd,
            n_ff = self.n_ff,
            n_head = self.n_head,
            n_head_kv = self.n_head_kv,
            head_dim = self.head_dim,
            n_rot = self.n_rot,
            neox = self.neox,
            n_ctx = self.n_ctx,
            max_chunks = self.max_chunks(),
            chunk = ATTENTION_CHUNK,
            att_hg = self.attention_heads_per_group(),
            stride = self.part_stride(),
            qkv_bias = self.arch.qkv_bias,
            o_bias = self.arch.o_bias,
            qk_norm = self.arch.qk_norm,
            post_norms = self.arch.post_norms,
            gelu = self.arch.gelu,
            qkn_len = if self.arch.qk_norm { self.head_dim } else { 1 },
            reduce = if sg {
                shaders::REDUCE_SUBGROUP
            } else {
                shaders::REDUCE_SHARED
            },
        )
    }

    /// Bytes of workgroup memory of the two kernels whose arrays grow with the shape:
    /// `fused_ffn_up` (the whole residual, n_embd floats, and the attention merge weights) and
    /// `fused_attention` (the workgroup's queries, scores and value lanes), each with the row
    /// reductions' scratch (`subgroups`: [`GpuContext::subgroups32`]). Counted as the WGSL
    /// declares them (fused_ffn_up.wgsl, fused_attention.wgsl, reduce_*.wgsl).
    pub fn workgroup_bytes(&self, subgroups: bool) -> [(&'static str, u32); 2] {
        // WebGPU counts each variable rounded up to 16 bytes.
        let var = |bytes: u32| bytes.next_multiple_of(16);
        // reduce_subgroup.wgsl: sg_part4 (8 vec4); reduce_shared.wgsl: red4 (256 vec4).
        let reduce = var(if subgroups { 8 * 16 } else { 256 * 16 });
        let ffn_up =
            var(self.n_embd * 4) + var(self.n_head * self.max_chunks() * 4) + var(4) + reduce;
        let hg = self.attention_heads_per_group();
        let qkn = if self.arch.qk_norm { self.head_dim } else { 1 };
        let attention = var(hg * self.head_dim * 4)
            + var(WORKGROUP * 16)
            + var(hg * ATTENTION_CHUNK * 4)
            + var(4)
            + 2 * var(qkn * 4)
            + var(qkn.div_ceil(4) * 16)
            + reduce;
        [("fused_ffn_up", ffn_up), ("fused_attention", attention)]
    }

    /// [`check`](Self::check), and the workgroup memory the kernels declare against the
    /// device's `maxComputeWorkgroupStorageSize`.
    pub fn check_device(&self, ctx: &GpuContext) -> Result<()> {
        self.check_limits(
            ctx.device.limits().max_compute_workgroup_storage_size,
            ctx.subgroups32(),
        )
    }

    /// [`check_device`](Self::check_device) for a device with `available` bytes of workgroup
    /// memory that reduces rows with subgroups or not.
    pub fn check_limits(&self, available: u32, subgroups: bool) -> Result<()> {
        self.check()?;
        for (kernel, needed) in self.workgroup_bytes(subgroups) {
            if needed > available {
                return Err(FuselmError::LimitExceeded {
                    limit: if kernel == "fused_ffn_up" {
                        "maxComputeWorkgroupStorageSize (fused_ffn_up: 4 bytes per n_embd)"
                    } else {
                        "maxComputeWorkgroupStorageSize (fused_attention)"
                    },
                    needed: u64::from(needed),
                    available: u64::from(available),
                });
            }
        }
        Ok(())
    }

    /// Whether the fused kernels handle this geometry on some device; the error names the
    /// limit. [`check_device`](Self::check_device) adds the device's limits.
    pub fn check(&self) -> Result<()> {
        let limit = |limit: &'static str, needed: u32, available: u32| {
            if needed > available {
                Err(FuselmError::LimitExceeded {
                    limit,
                    needed: u64::from(needed),
                    available: u64::from(available),
                })
            } else {
                Ok(())
            }
        };
        limit("fused strategy: n_embd", self.n_embd, MAX_EMBD)?;
        limit("fused strategy: head_dim", self.head_dim, MAX_HEAD_DIM)?;
        limit(
            "fused strategy: n_head x attention chunks (nCtx / 256)",
            self.n_head * self.max_chunks(),
            MAX_HEAD_CHUNKS,
        )?;
        require(
            self.head_dim % 8 == 0 && self.n_rot % 2 == 0 && self.n_rot <= self.head_dim,
            "fused strategy: head_dim must be a multiple of 8 and n_rot even and <= head_dim",
        )?;
        require(
            self.n_embd % 8 == 0 && self.n_ff % 8 == 0 && self.n_ctx > 0,
            "fused strategy: n_embd and n_ff must be multiples of 8",
        )?;
        require(
            self.n_head_kv > 0 && self.n_head % self.n_head_kv == 0,
            "fused strategy: n_head must be a multiple of n_head_kv",
        )
    }
}
