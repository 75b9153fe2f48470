//! Appending this step's K and V to the KV cache.

use super::attention::{AttentionShape, KvFormat};
use super::binding::Res;
use super::checks::{check_buffer, check_bytes, check_tokens, require};
use super::dispatch::{grid, max_groups};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::shaders;

/// Mirrors `Params` in `shaders/kv_store.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct KvStoreParams {
    n_head_kv: u32,
    head_dim: u32,
    n_ctx: u32,
    _pad: u32,
}
const _: () = assert!(std::mem::size_of::<KvStoreParams>() == 16);

const WG: u64 = 64;

/// Copies `k[t]`, `v[t]` (`[n_head_kv, head_dim]` each) into cache position
/// `state.pos + t` of the head-major `[n_head_kv, n_ctx, head_dim]` caches.
#[derive(Debug, Clone)]
pub struct KvStore {
    pipeline: Pipeline,
    kv: KvFormat,
}

/// [`KvStore`] bound to one layer's buffers.
#[derive(Debug, Clone)]
pub struct KvStoreCall {
    bound: Bound,
    per_token: u64,
    max_tokens: u32,
    max_dim: u32,
}

impl KvStore {
    /// A store into a `kv`-typed cache (F16 fails without SHADER_F16).
    pub async fn new(ctx: &GpuContext, kv: KvFormat) -> Result<Self> {
        let source = compose(&[kv.prelude(ctx)?, shaders::COMMON, shaders::KV_STORE]);
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
            Slot::ReadWrite,
        ];
        let pipeline = Pipeline::new(ctx, "kv_store", &source, &slots).await?;
        Ok(Self { pipeline, kv })
    }

    /// * `k`, `v`: `[max_tokens, n_head_kv, head_dim]` (k already rotated);
    /// * `k_cache`, `v_cache`: `[n_head_kv, n_ctx, head_dim]` of the kernel's [`KvFormat`].
    #[allow(clippy::too_many_arguments)]
    pub fn bind<'a>(
        &self,
        ctx: &GpuContext,
        shape: &AttentionShape,
        state: &'a wgpu::Buffer,
        k: &'a wgpu::Buffer,
        v: &'a wgpu::Buffer,
        k_cache: impl Into<Res<'a>>,
        v_cache: impl Into<Res<'a>>,
        max_tokens: u32,
    ) -> Result<KvStoreCall> {
        let (k_cache, v_cache) = (k_cache.into(), v_cache.into());
        shape.validate()?;
        require(max_tokens > 0, "kv_store: max_tokens must be > 0")?;
        let t = u64::from(max_tokens);
        check_buffer(ctx, "kv_store state", state, 4)?;
        check_buffer(ctx, "kv_store k", k, t * shape.kv_row())?;
        check_buffer(ctx, "kv_store v", v, t * shape.kv_row())?;
        let cache = shape.cache_bytes(self.kv);
        check_bytes(ctx, "kv_store k_cache", k_cache, cache)?;
        check_bytes(ctx, "kv_store v_cache", v_cache, cache)?;
        let params = KvStoreParams {
            n_head_kv: shape.n_head_kv,
            head_dim: shape.head_dim,
            n_ctx: shape.n_ctx,
            _pad: 0,
        };
        grid((t * shape.kv_row()).div_ceil(WG), max_groups(ctx))?;
        Ok(KvStoreCall {
            bound: self.pipeline.bind(
                ctx,
                &params,
                &[state.into(), k.into(), v.into(), k_cache, v_cache],
            )?,
            per_token: shape.kv_row(),
            max_tokens,
            max_dim: max_groups(ctx),
        })
    }
}

impl KvStoreCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_tokens: u32) -> Result<()> {
        check_tokens("kv_store", n_tokens, self.max_tokens)?;
        let (x, y) = grid(
            (u64::from(n_tokens) * self.per_token).div_ceil(WG),
            self.max_dim,
        )?;
        self.bound.dispatch(pass, [x, y, 1]);
        Ok(())
    }
}
