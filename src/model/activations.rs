//! Every buffer a forward pass writes, preallocated once at load: activations for up to
//! `max_batch` tokens, the `state` and `tokens` buffers, a fixed-capacity KV cache, and the GPU
//! sampler's buffers.

use super::gpu_weights::ModelWeights;
use crate::error::{FuselmError, Result};
use crate::gguf::ModelConfig;
use crate::gpu::GpuContext;
use crate::kernels::sample::{head_groups, select_lists, HEAD_ROWS_PER_WORKGROUP};
use crate::kernels::{stack_views, BufferView, DecodeState, KvFormat};
use crate::sampling::{SamplerParams, MAX_CANDIDATES};

pub struct Activations {
    pub n_ctx: u32,
    pub max_batch: u32,
    /// [`DecodeState`]: position and token count of the current step.
    pub state: wgpu::Buffer,
    /// `[n_ctx]` u32: the prompt, then every token argmax chose.
    pub tokens: wgpu::Buffer,
    pub x: wgpu::Buffer,  // [max_batch, n_embd] residual stream
    pub xn: wgpu::Buffer, // [max_batch, n_embd] normalized
    pub q: wgpu::Buffer,  // [max_batch, n_head * head_dim]
    pub k: wgpu::Buffer,  // [max_batch, n_head_kv * head_dim]
    /// K before its per-head norm (models with Q/K norms; Q's goes through `att`).
    pub k_raw: Option<wgpu::Buffer>, // [max_batch, n_head_kv * head_dim]
    pub v: wgpu::Buffer,  // [max_batch, n_head_kv * head_dim]
    pub att: wgpu::Buffer, // [max_batch, n_head * head_dim]
    pub o: wgpu::Buffer,  // [max_batch, n_embd] attention/FFN output before the residual add
    pub gate: wgpu::Buffer, // [max_batch, n_ff]
    pub up: wgpu::Buffer, // [max_batch, n_ff]
    pub hidden: wgpu::Buffer, // [max_batch, n_ff]
    pub x_last: wgpu::Buffer, // [n_embd] final norm of the last token
    pub logits: wgpu::Buffer, // [vocab]
    /// `[max_batch, vocab]`, only for teacher forcing / evaluation.
    pub logits_all: Option<wgpu::Buffer>,
    /// Per layer `[n_head_kv, n_ctx, head_dim]` in the model's KV format (f32 or f16): views
    /// into one buffer that stacks every layer's K (and one for V) when it fits a storage
    /// binding, so the fused kernels bind all layers at once; else one buffer per layer.
    pub k_cache: Vec<BufferView>,
    pub v_cache: Vec<BufferView>,
    /// Bytes from one layer's K (or V) view to the next's in the stacked buffers; `None`:
    /// one buffer per layer.
    pub kv_stride: Option<u64>,
}

fn f32s(ctx: &GpuContext, label: &str, len: u64) -> Result<wgpu::Buffer> {
    checked_storage(ctx, label, len * 4)
}

fn checked_storage(ctx: &GpuContext, label: &str, bytes: u64) -> Result<wgpu::Buffer> {
    let bytes = bytes.max(4).div_ceil(4) * 4;
    let limits = ctx.device.limits();
    let cap = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size);
    if bytes > cap {
        return Err(FuselmError::LimitExceeded {
            limit: "maxStorageBufferBindingSize",
            needed: bytes,
            available: cap,
        });
    }
    Ok(ctx.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: bytes,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    }))
}

impl Activations {
    pub fn new(
        ctx: &GpuContext,
        c: &ModelConfig,
        n_ctx: u32,
        max_batch: u32,
        kv: KvFormat,
        all_logits: bool,
    ) -> Result<Self> {
        let b = u64::from(max_batch);
        let embd = u64::from(c.n_embd);
        let q_dim = u64::from(c.n_head) * u64::from(c.head_dim);
        let kv_dim = u64::from(c.n_head_kv) * u64::from(c.head_dim);
        let ff = u64::from(c.n_ff);
        let vocab = u64::from(c.vocab_size);
        let cache_bytes = kv_dim * u64::from(n_ctx) * kv.bytes();
        let layers = c.n_layers as usize;
        let (k_cache, v_cache, kv_stride) = match (
            stack_views(ctx, "k_cache", layers, cache_bytes),
            stack_views(ctx, "v_cache", layers, cache_bytes),
        ) {
            (Some((k, stride)), Some((v, _))) => (k, v, Some(stride)),
            _ => {
                let mut k = Vec::with_capacity(layers);
                let mut v = Vec::with_capacity(layers);
                for i in 0..c.n_layers {
                    k.push(BufferView::whole(checked_storage(
                        ctx,
                        &format!("k_cache.{i}"),
                        cache_bytes,
                    )?));
                    v.push(BufferView::whole(checked_storage(
                        ctx,
                        &format!("v_cache.{i}"),
                        cache_bytes,
                    )?));
                }
                (k, v, None)
            }
        };
        let tokens = ctx.create_buffer(&wgpu::BufferDescriptor {
            label: Some("tokens"),
            size: u64::from(n_ctx) * 4,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Ok(Self {
            n_ctx,
            max_batch,
            state: DecodeState::new(0, 1).create_buffer(ctx),
            tokens,
            x: f32s(ctx, "x", b * embd)?,
            xn: f32s(ctx, "xn", b * embd)?,
            q: f32s(ctx, "q", b * q_dim)?,
            k: f32s(ctx, "k", b * kv_dim)?,
            k_raw: if c.qk_norm {
                Some(f32s(ctx, "k_raw", b * kv_dim)?)
            } else {
                None
            },
            v: f32s(ctx, "v", b * kv_dim)?,
            att: f32s(ctx, "att", b * q_dim)?,
            o: f32s(ctx, "o", b * embd)?,
            gate: f32s(ctx, "gate", b * ff)?,
            up: f32s(ctx, "up", b * ff)?,
            hidden: f32s(ctx, "hidden", b * ff)?,
            x_last: f32s(ctx, "x_last", embd)?,
            logits: f32s(ctx, "logits", vocab)?,
            logits_all: if all_logits {
                Some(f32s(ctx, "logits_all", b * vocab)?)
            } else {
                None
            },
            k_cache,
            v_cache,
            kv_stride,
        })
    }
}

impl Activations {
    /// Bytes of the buffers [`Activations::new`] makes besides the KV cache, from the shapes
    /// alone (the memory estimate before a load; tests hold it to [`Activations::bytes`]).
    pub fn bytes_for(c: &ModelConfig, n_ctx: u32, max_batch: u32, all_logits: bool) -> u64 {
        let f32s = |len: u64| (len * 4).max(4).div_ceil(4) * 4;
        let b = u64::from(max_batch);
        let embd = u64::from(c.n_embd);
        let q_dim = u64::from(c.n_head) * u64::from(c.head_dim);
        let kv_dim = u64::from(c.n_head_kv) * u64::from(c.head_dim);
        let ff = u64::from(c.n_ff);
        let vocab = u64::from(c.vocab_size);
        let state = std::mem::size_of::<DecodeState>() as u64;
        let tokens = u64::from(n_ctx) * 4;
        state
            + tokens
            + 3 * f32s(b * embd) // x, xn, o
            + 2 * f32s(b * q_dim) // q, att
            + (2 + u64::from(c.qk_norm)) * f32s(b * kv_dim) // k, v (k_raw)
            + 3 * f32s(b * ff) // gate, up, hidden
            + f32s(embd)
            + f32s(vocab)
            + if all_logits { f32s(b * vocab) } else { 0 }
    }

    /// Every buffer but the KV cache.
    fn buffers(&self) -> impl Iterator<Item = &wgpu::Buffer> {
        [
            &self.state,
            &self.tokens,
            &self.x,
            &self.xn,
            &self.q,
            &self.k,
            &self.v,
            &self.att,
            &self.o,
            &self.gate,
            &self.up,
            &self.hidden,
            &self.x_last,
            &self.logits,
        ]
        .into_iter()
        .chain(self.k_raw.as_ref())
        .chain(self.logits_all.as_ref())
    }

    /// Bytes of these buffers besides the KV cache.
    pub fn bytes(&self) -> u64 {
        self.buffers().map(wgpu::Buffer::size).sum()
    }

    /// Destroys every buffer (for a reallocation: whatever was bound to them must bind again).
    pub fn release(self, ctx: &GpuContext) {
        let caches = self.k_cache.iter().chain(&self.v_cache).map(|v| &v.buffer);
        for b in self.buffers().chain(caches) {
            ctx.release(b);
        }
    }
}

/// The GPU sampler's buffers beyond [`Activations`], shared by the strategies that sample on
/// the GPU (fused, the megakernels).
pub struct SamplerBuffers {
    /// [`SamplerParams`], written by the host once per generation.
    pub params: wgpu::Buffer,
    /// `[vocab]` u32: occurrences of each id in the penalty window.
    pub counts: wgpu::Buffer,
    /// `[head groups]` (f32 bits, id): each head workgroup's best logit.
    pub best: wgpu::Buffer,
    /// `[lists, MAX_CANDIDATES]` (z bits, id): per-slice candidates.
    pub cand: wgpu::Buffer,
}

/// A storage buffer of at least `bytes` (rounded up to 16) that can be written and copied from.
pub(crate) fn storage(ctx: &GpuContext, label: &str, bytes: u64) -> wgpu::Buffer {
    ctx.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: bytes.max(16).div_ceil(16) * 16,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

impl SamplerBuffers {
    pub fn new(ctx: &GpuContext, weights: &ModelWeights, vocab: u32) -> Self {
        Self {
            params: storage(
                ctx,
                "sampler params",
                std::mem::size_of::<SamplerParams>() as u64,
            ),
            counts: storage(ctx, "penalty counts", u64::from(vocab) * 4),
            best: storage(
                ctx,
                "head bests",
                u64::from(head_groups(weights.head())) * 8,
            ),
            cand: storage(
                ctx,
                "sample candidates",
                u64::from(select_lists(vocab)) * u64::from(MAX_CANDIDATES) * 8,
            ),
        }
    }

    /// Bytes of the buffers [`SamplerBuffers::new`] makes for a vocabulary whose output head
    /// is one buffer (the memory estimate before a load).
    pub fn bytes_for(vocab: u32) -> u64 {
        let storage = |bytes: u64| bytes.max(16).div_ceil(16) * 16;
        storage(std::mem::size_of::<SamplerParams>() as u64)
            + storage(u64::from(vocab) * 4)
            + storage(u64::from(vocab.div_ceil(HEAD_ROWS_PER_WORKGROUP)) * 8)
            + storage(u64::from(select_lists(vocab)) * u64::from(MAX_CANDIDATES) * 8)
    }

    /// Bytes of these buffers.
    pub fn bytes(&self) -> u64 {
        [&self.params, &self.counts, &self.best, &self.cand]
            .into_iter()
            .map(|b| b.size())
            .sum()
    }
}
