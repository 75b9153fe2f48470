//! Causal grouped-query attention over the KV cache.

use super::binding::Res;
use super::checks::{check_buffer, check_bytes, check_tokens, require};
use super::dispatch::{check_dim, max_groups};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use crate::error::{FuselmError, Result};
use crate::gpu::GpuContext;
use crate::shaders;

/// The head geometry shared by [`super::Rope`], [`super::KvStore`] and [`Attention`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionShape {
    pub n_head: u32,
    pub n_head_kv: u32,
    pub head_dim: u32,
    /// KV cache capacity in positions.
    pub n_ctx: u32,
}

/// Element type of the KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvFormat {
    /// Works on every adapter.
    F32,
    /// Half the memory and bandwidth; needs `wgpu::Features::SHADER_F16` (absent in
    /// browsers on SwiftShader and many others, so callers fall back to `F32`).
    F16,
}

impl KvFormat {
    pub fn bytes(self) -> u64 {
        match self {
            KvFormat::F32 => 4,
            KvFormat::F16 => 2,
        }
    }

    /// The WGSL prelude (`alias kv_t`), after checking the device can run it.
    pub(crate) fn prelude(self, ctx: &GpuContext) -> Result<&'static str> {
        match self {
            KvFormat::F32 => Ok(shaders::KV_F32),
            KvFormat::F16 if ctx.has(wgpu::Features::SHADER_F16) => Ok(shaders::KV_F16),
            KvFormat::F16 => Err(FuselmError::InvalidArgument(
                "f16 KV cache needs the shader-f16 feature, which this device lacks".into(),
            )),
        }
    }
}

/// Largest head_dim attention.wgsl handles (4 output dims per invocation of 64).
pub const MAX_HEAD_DIM: u32 = 256;

impl AttentionShape {
    /// Checks the geometry: non-zero dims, whole query groups per KV head.
    pub fn validate(&self) -> Result<()> {
        let s = self;
        require(
            s.n_head > 0 && s.n_head_kv > 0 && s.head_dim > 0 && s.n_ctx > 0,
            "attention shape: dims must be > 0",
        )?;
        require(
            s.n_head % s.n_head_kv == 0,
            "attention shape: n_head must be a multiple of n_head_kv",
        )
    }

    /// Floats in one step-row of Q (`n_head * head_dim`).
    pub fn q_row(&self) -> u64 {
        u64::from(self.n_head) * u64::from(self.head_dim)
    }

    /// Floats in one step-row of K or V (`n_head_kv * head_dim`).
    pub fn kv_row(&self) -> u64 {
        u64::from(self.n_head_kv) * u64::from(self.head_dim)
    }

    /// Elements in one layer's K (or V) cache: `[n_head_kv, n_ctx, head_dim]`.
    pub fn cache_len(&self) -> u64 {
        self.kv_row() * u64::from(self.n_ctx)
    }

    /// Bytes of one layer's K (or V) cache, rounded up to 4 (a storage-buffer multiple).
    pub fn cache_bytes(&self, kv: KvFormat) -> u64 {
        (self.cache_len() * kv.bytes()).div_ceil(4) * 4
    }
}

/// Which keys a query sees and how its scores are scaled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionMask {
    /// Scores are `q · k * scale`.
    pub scale: f32,
    /// Sliding window: a query at position p sees keys at p - window < j <= p.
    pub window: Option<u32>,
}

impl AttentionMask {
    /// Every earlier key, scale `1 / sqrt(head_dim)`.
    pub fn standard(head_dim: u32) -> Self {
        Self {
            scale: 1.0 / (head_dim as f32).sqrt(),
            window: None,
        }
    }
}

/// Mirrors `Params` in `shaders/attention.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct AttentionParams {
    n_head: u32,
    n_head_kv: u32,
    head_dim: u32,
    n_ctx: u32,
    scale: f32,
    window: u32,
    _pad: [u32; 2],
}
const _: () = assert!(std::mem::size_of::<AttentionParams>() == 32);

/// `out[t][h] = softmax(q[t][h] · K[g]^T / sqrt(head_dim)) V[g]` over cache positions
/// `0..=state.pos + t`, `g = h / (n_head / n_head_kv)`. Short batches: one workgroup per
/// (head, token) (`shaders/attention.wgsl`); batches from [`TILED_FROM_TOKENS`] tokens (64 with
/// the larger tile): one per
/// (head, block of query tokens) sharing each tile of keys and values through workgroup memory
/// (`shaders/attention_tiled.wgsl`, compiled for one head_dim, and only where a batch can
/// reach it: [`Attention::for_batches`]).
#[derive(Debug, Clone)]
pub struct Attention {
    pipeline: Pipeline,
    /// `None` where no batch the kernel was made for reaches [`Attention::tiled_from`].
    tiled: Option<Pipeline>,
    tile: Tile,
    kv: KvFormat,
}

/// [`Attention`] bound to its buffers.
#[derive(Debug, Clone)]
pub struct AttentionCall {
    bound: Bound,
    tiled: Option<Bound>,
    block: u32,
    tiled_from: u32,
    n_head: u32,
    max_tokens: u32,
    max_dim: u32,
}

/// Batches of at least this many tokens use the tiled kernel (`KernelTuning::attention_tiled_from`
/// overrides it). Measured on an H200 with SmolLM2 (bench/NOTES.md, "Prefill kernels"): the
/// 16 x 32 tile of 128 invocations was slower than the per-token kernel at 128 tokens (8.8 vs
/// 8.3 ms for the whole prefill) and faster from 256; the 32 x 32 tile of 256 invocations
/// (adapters with 32 KiB of workgroup memory) is faster from 64 tokens (7.37 vs 7.49 ms; 8.13
/// vs 8.51 at 128).
pub const TILED_FROM_TOKENS: u32 = 256;
/// [`TILED_FROM_TOKENS`] for 256-invocation tiles.
pub const TILED_256_FROM_TOKENS: u32 = 64;

/// The tiled kernel's blocks for one head_dim: `bq` query tokens per workgroup of `wg`
/// invocations, keys visited `bk` at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tile {
    pub head_dim: u32,
    pub bq: u32,
    pub bk: u32,
    /// Invocations per workgroup (`WG`: 128 or 256).
    pub wg: u32,
}

impl Tile {
    /// Workgroup memory the tiled kernel uses at most (48 KiB: an H200's through Vulkan; browsers
    /// offer 16–32 KiB).
    const MAX_BYTES: u32 = 48 << 10;

    /// For heads of `head_dim` and `storage_bytes` of workgroup memory: 32 query tokens x 32 keys
    /// on 256 invocations where they fit; else 16 query tokens (8 where 16 do not fit) on 128
    /// invocations and the most keys, a power of two from 2 to 32, with at most one 2 x 2 score
    /// block per invocation. Queries, keys and values (rows of vec4s padded by one), scores and
    /// reductions must fit, less a few words the kernel keeps besides. Measured: a larger tile
    /// is faster wherever it fits (bench/NOTES.md, "Prefill kernels").
    pub fn for_head_dim(head_dim: u32, storage_bytes: u32) -> Self {
        let hd = head_dim.clamp(1, MAX_HEAD_DIM);
        let floats = storage_bytes.min(Self::MAX_BYTES) / 4 - 96;
        let tile = |bq, bk| {
            let wg = if (bq / 2) * (bk / 2) > 128 { 256 } else { 128 };
            Self {
                head_dim: hd,
                bq,
                bk,
                wg,
            }
        };
        if tile(32, 32).floats() <= floats {
            return tile(32, 32);
        }
        let bq = if tile(16, 2).floats() <= floats {
            16
        } else {
            8
        };
        let mut bk = 32;
        while bk > 2 && ((bq / 2) * (bk / 2) > 128 || tile(bq, bk).floats() > floats) {
            bk /= 2;
        }
        tile(bq, bk)
    }

    /// Floats of workgroup memory (attention_tiled.wgsl's arrays).
    fn floats(&self) -> u32 {
        let hd4 = self.head_dim.div_ceil(4);
        let (bq, bk) = (self.bq, self.bk);
        bq * hd4 * 4 + bk * (hd4 + 1) * 4 + bq * bk + self.part() + self.wg + bq
    }

    /// Partial scores' floats: where fewer 2 x 2 blocks than invocations share the dims.
    fn part(&self) -> u32 {
        if (self.bq / 2) * (self.bk / 2) < self.wg {
            self.wg * 4
        } else {
            1
        }
    }

    fn prelude(&self) -> String {
        format!(
            "const HD: u32 = {}u;\nconst BQ: u32 = {}u;\nconst BK: u32 = {}u;\nconst PART: u32 = {}u;\nconst WG: u32 = {}u;\n",
            self.head_dim,
            self.bq,
            self.bk,
            self.part(),
            self.wg
        )
    }
}

impl Attention {
    /// An attention kernel over a `kv`-typed cache (F16 fails without SHADER_F16), its tiled
    /// variant for heads of `head_dim`.
    pub async fn new(ctx: &GpuContext, kv: KvFormat, head_dim: u32) -> Result<Self> {
        Self::for_batches(ctx, kv, head_dim, u32::MAX).await
    }

    /// [`Attention::new`] for batches of at most `max_tokens`: the tiled variant is compiled
    /// only where such a batch reaches [`Attention::tiled_from`] (each pipeline is a compile at
    /// every model load; a software adapter's 128-token batches never use a 128-invocation tile).
    pub async fn for_batches(
        ctx: &GpuContext,
        kv: KvFormat,
        head_dim: u32,
        max_tokens: u32,
    ) -> Result<Self> {
        let source = compose(&[kv.prelude(ctx)?, shaders::COMMON, shaders::ATTENTION]);
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        let pipeline = Pipeline::new(ctx, "attention", &source, &slots).await?;
        let storage = ctx.device.limits().max_compute_workgroup_storage_size;
        let tile = Tile::for_head_dim(head_dim, storage);
        let from = Self::tiled_from(ctx, tile, head_dim);
        let tiled = if from > 0 && from <= max_tokens {
            let source = compose(&[
                kv.prelude(ctx)?,
                shaders::COMMON,
                &tile.prelude(),
                shaders::ATTENTION_TILED,
            ]);
            Some(Pipeline::new(ctx, "attention_tiled", &source, &slots).await?)
        } else {
            None
        };
        Ok(Self {
            pipeline,
            tiled,
            tile,
            kv,
        })
    }

    /// The tiled kernel's blocks.
    pub fn tile(&self) -> Tile {
        self.tile
    }

    /// Batches of heads of `head_dim` from this many tokens use `tile` (0: never): the context's
    /// tuning, else [`TILED_256_FROM_TOKENS`] or [`TILED_FROM_TOKENS`] by the tile's size. The
    /// tiled kernel is compiled for one head_dim; another shape keeps the per-token one.
    fn tiled_from(ctx: &GpuContext, tile: Tile, head_dim: u32) -> u32 {
        match ctx.tuning().attention_tiled_from {
            _ if head_dim != tile.head_dim => 0,
            Some(n) => n,
            None if tile.wg == 256 => TILED_256_FROM_TOKENS,
            None => TILED_FROM_TOKENS,
        }
    }

    /// * `q`, `out`: `[max_tokens, n_head, head_dim]`;
    /// * `k_cache`, `v_cache`: `[n_head_kv, n_ctx, head_dim]` of the kernel's [`KvFormat`]
    ///   (written by [`super::KvStore`]).
    #[allow(clippy::too_many_arguments)]
    pub fn bind<'a>(
        &self,
        ctx: &GpuContext,
        shape: &AttentionShape,
        state: &'a wgpu::Buffer,
        q: &'a wgpu::Buffer,
        k_cache: impl Into<Res<'a>>,
        v_cache: impl Into<Res<'a>>,
        out: &'a wgpu::Buffer,
        max_tokens: u32,
    ) -> Result<AttentionCall> {
        let mask = AttentionMask::standard(shape.head_dim);
        self.bind_masked(
            ctx, shape, mask, state, q, k_cache, v_cache, out, max_tokens,
        )
    }

    /// [`Attention::bind`] with the model's score scale and sliding window.
    #[allow(clippy::too_many_arguments)]
    pub fn bind_masked<'a>(
        &self,
        ctx: &GpuContext,
        shape: &AttentionShape,
        mask: AttentionMask,
        state: &'a wgpu::Buffer,
        q: &'a wgpu::Buffer,
        k_cache: impl Into<Res<'a>>,
        v_cache: impl Into<Res<'a>>,
        out: &'a wgpu::Buffer,
        max_tokens: u32,
    ) -> Result<AttentionCall> {
        let (k_cache, v_cache) = (k_cache.into(), v_cache.into());
        shape.validate()?;
        require(max_tokens > 0, "attention: max_tokens must be > 0")?;
        if shape.head_dim > MAX_HEAD_DIM {
            return Err(FuselmError::InvalidArgument(format!(
                "attention: head_dim {} > {MAX_HEAD_DIM}",
                shape.head_dim
            )));
        }
        let t = u64::from(max_tokens);
        check_buffer(ctx, "attention state", state, 4)?;
        check_buffer(ctx, "attention q", q, t * shape.q_row())?;
        let cache = shape.cache_bytes(self.kv);
        check_bytes(ctx, "attention k_cache", k_cache, cache)?;
        check_bytes(ctx, "attention v_cache", v_cache, cache)?;
        check_buffer(ctx, "attention out", out, t * shape.q_row())?;
        let params = AttentionParams {
            n_head: shape.n_head,
            n_head_kv: shape.n_head_kv,
            head_dim: shape.head_dim,
            n_ctx: shape.n_ctx,
            scale: mask.scale,
            window: mask.window.unwrap_or(0),
            _pad: [0; 2],
        };
        let n_head = check_dim(u64::from(shape.n_head), max_groups(ctx))?;
        let buffers = [state.into(), q.into(), k_cache, v_cache, out.into()];
        let tiled = match &self.tiled {
            Some(p) => Some(p.bind(ctx, &params, &buffers)?),
            None => None,
        };
        Ok(AttentionCall {
            bound: self.pipeline.bind(ctx, &params, &buffers)?,
            tiled,
            tiled_from: Self::tiled_from(ctx, self.tile, shape.head_dim),
            block: self.tile.bq,
            n_head,
            max_tokens,
            max_dim: max_groups(ctx),
        })
    }
}

impl AttentionCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_tokens: u32) -> Result<()> {
        check_tokens("attention", n_tokens, self.max_tokens)?;
        match &self.tiled {
            Some(tiled) if self.tiled_from > 0 && n_tokens >= self.tiled_from => {
                let y = check_dim(u64::from(n_tokens.div_ceil(self.block)), self.max_dim)?;
                tiled.dispatch(pass, [self.n_head, y, 1]);
            }
            _ => {
                let y = check_dim(u64::from(n_tokens), self.max_dim)?;
                self.bound.dispatch(pass, [self.n_head, y, 1]);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Tile;

    /// Every head_dim's tile fits the workgroup memory it was sized for (with the kernel's own
    /// words), has whole 2 x 2 score blocks for at most one per invocation, and keeps WebGPU's
    /// default 16 KiB tiles where an adapter offers only that.
    #[test]
    fn tiles_fit_their_workgroup_memory() {
        for storage in [16 << 10, 32 << 10, 48 << 10, 64 << 10] {
            for hd in 1..=256 {
                let t = Tile::for_head_dim(hd, storage);
                let bytes = 4 * (t.floats() + 2);
                assert!(bytes <= storage.min(Tile::MAX_BYTES), "{t:?} at {storage}");
                assert!(t.bq % 2 == 0 && t.bk % 2 == 0 && t.bk >= 2, "{t:?}");
                assert!((t.bq / 2) * (t.bk / 2) <= t.wg, "{t:?}");
                assert!(t.wg == 128 || t.wg == 256, "{t:?}");
            }
        }
        let at = |hd, kib: u32| {
            let t = Tile::for_head_dim(hd, kib << 10);
            (t.bq, t.bk, t.wg)
        };
        assert_eq!(at(64, 16), (16, 32, 128));
        assert_eq!(at(128, 16), (16, 8, 128));
        assert_eq!(at(256, 16), (8, 4, 128));
        assert_eq!(at(64, 32), (32, 32, 256));
        assert_eq!(at(128, 48), (32, 32, 256));
        assert_eq!(at(256, 48), (16, 16, 128));
    }
}
