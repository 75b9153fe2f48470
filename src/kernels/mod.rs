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

mod add;
mod argmax;
mod attention;
mod embed;
pub mod fused_layer;
mod kv_store;
mod layer_indexing;
mod matmul;
mod matvec;
pub mod megakernel;
mod rms_norm;
mod rope;
pub mod sample;
mod state;
mod swiglu;
pub mod tuning;
pub mod weights;

pub use add::{Add, AddCall};
pub use argmax::{Argmax, ArgmaxCall};
pub use attention::{Attention, AttentionCall, AttentionMask, AttentionShape, KvFormat};
pub use embed::{Embed, EmbedCall};
pub use fused_layer::{
    FusedArch, FusedAttention, FusedAttentionCall, FusedCall, FusedFfnDown, FusedFfnUp,
    FusedFfnUpCall, FusedPostNorm, FusedQkv, FusedShape, LayerAttention, LayerIndexing,
    LayerVectors, NO_VECTOR,
};
pub use kv_store::{KvStore, KvStoreCall};
pub use matmul::{MatMul, MatMulCall};
pub use matvec::{MatVec, MatVecCall};
pub use rms_norm::{RmsNorm, RmsNormCall, RmsRows};
pub use rope::{Rope, RopeCall, RopeStyle};
pub use sample::{HeadLogits, HeadLogitsCall, SampleCall, SampleChoose, SampleSelect};
pub use state::{Advance, AdvanceCall, DecodeState};
pub use swiglu::{ElementwiseCall, SwiGlu, SwiGluCall};
pub use tuning::KernelTuning;
pub use weights::{GpuWeight, LayerStacks, WeightFormat};

use crate::error::{FuselmError, Result};
use crate::gpu::GpuContext;
use wgpu::util::DeviceExt;

/// How one binding of a kernel's explicit layout is declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Uniform,
    Read,
    ReadWrite,
}

/// A range of a buffer that is bound as one storage binding: one layer's slice of a buffer
/// that stacks a weight or KV cache of every layer (`offset` a multiple of the device's
/// minStorageBufferOffsetAlignment).
#[derive(Debug, Clone)]
pub struct BufferView {
    pub buffer: wgpu::Buffer,
    pub offset: u64,
    pub size: u64,
}

impl BufferView {
    /// The whole of `buffer`.
    pub fn whole(buffer: wgpu::Buffer) -> Self {
        let size = buffer.size();
        Self {
            buffer,
            offset: 0,
            size,
        }
    }
}

/// One buffer holding `count` slots of `slot_bytes` (each starting at a multiple of the
/// device's minStorageBufferOffsetAlignment), as views, and the stride between slots; `None`
/// when the whole would exceed maxStorageBufferBindingSize or maxBufferSize (or `count` is 0):
/// the caller then keeps one buffer per slot.
pub fn stack_views(
    ctx: &GpuContext,
    label: &str,
    count: usize,
    slot_bytes: u64,
) -> Option<(Vec<BufferView>, u64)> {
    let limits = ctx.device.limits();
    let align = u64::from(limits.min_storage_buffer_offset_alignment.max(4));
    let size = slot_bytes.max(4).div_ceil(4) * 4;
    let stride = size.div_ceil(align) * align;
    let total = stride.checked_mul(count as u64)?;
    let cap = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size);
    if count == 0 || total > cap {
        return None;
    }
    let buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: total,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let views = (0..count as u64)
        .map(|i| BufferView {
            buffer: buffer.clone(),
            offset: i * stride,
            size,
        })
        .collect();
    Some((views, stride))
}

/// What a binding holds: a whole buffer or a [`BufferView`]'s range.
#[derive(Debug, Clone, Copy)]
pub struct Res<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub offset: u64,
    pub size: u64,
}

impl Res<'_> {
    fn entire(&self) -> bool {
        self.offset == 0 && self.size == self.buffer.size()
    }
    fn overlaps(&self, o: &Res<'_>) -> bool {
        self.buffer == o.buffer
            && self.offset < o.offset + o.size
            && o.offset < self.offset + self.size
    }
}

impl<'a> From<&'a wgpu::Buffer> for Res<'a> {
    fn from(buffer: &'a wgpu::Buffer) -> Self {
        Self {
            buffer,
            offset: 0,
            size: buffer.size(),
        }
    }
}

impl<'a> From<&'a BufferView> for Res<'a> {
    fn from(v: &'a BufferView) -> Self {
        Self {
            buffer: &v.buffer,
            offset: v.offset,
            size: v.size,
        }
    }
}

/// A compiled kernel variant: its pipeline and explicit bind-group layout.
#[derive(Debug, Clone)]
pub(crate) struct Pipeline {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    slots: Vec<Slot>,
    label: &'static str,
    /// The bind group index the kernel's bindings use (`@group(group)`; the pipeline layout
    /// leaves the other indices empty, so bind groups set there stay bound).
    group: u32,
}

impl Pipeline {
    /// Compiles `source` and builds its pipeline (entry point `main`) with the layout `slots`.
    pub(crate) async fn new(
        ctx: &GpuContext,
        label: &'static str,
        source: &str,
        slots: &[Slot],
    ) -> Result<Self> {
        let module = ctx.shader(label, source).await?;
        Self::from_module(ctx, label, &module, slots, 0).await
    }

    /// [`Pipeline::new`] for a kernel whose bindings are `@group(group)`: its pipeline layout
    /// has no bind group layout below `group` (WebGPU's null entries), so a pass can keep other
    /// kernels' bind groups set at those indices while it runs this one.
    pub(crate) async fn new_in_group(
        ctx: &GpuContext,
        label: &'static str,
        source: &str,
        slots: &[Slot],
        group: u32,
    ) -> Result<Self> {
        let module = ctx.shader(label, source).await?;
        Self::from_module(ctx, label, &module, slots, group).await
    }

    /// [`Pipeline::new`] for source that is not ours (a user's simulation environment):
    /// compiled with all of WebGPU's runtime checks, including forced loop bounding.
    pub(crate) async fn new_checked(
        ctx: &GpuContext,
        label: &'static str,
        source: &str,
        slots: &[Slot],
    ) -> Result<Self> {
        let module = ctx.shader_checked(label, source).await?;
        Self::from_module(ctx, label, &module, slots, 0).await
    }

    async fn from_module(
        ctx: &GpuContext,
        label: &'static str,
        module: &wgpu::ShaderModule,
        slots: &[Slot],
        group: u32,
    ) -> Result<Self> {
        let entries: Vec<wgpu::BindGroupLayoutEntry> = slots
            .iter()
            .enumerate()
            .map(|(i, slot)| wgpu::BindGroupLayoutEntry {
                binding: i as u32,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: match slot {
                        Slot::Uniform => wgpu::BufferBindingType::Uniform,
                        Slot::Read => wgpu::BufferBindingType::Storage { read_only: true },
                        Slot::ReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
                    },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let device = &ctx.device;
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(label),
            entries: &entries,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(label),
            bind_group_layouts: &(0..=group)
                .map(|g| (g == group).then_some(&layout))
                .collect::<Vec<_>>(),
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(label),
            layout: Some(&pipeline_layout),
            module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        if let Some(e) = scope.pop().await {
            return Err(FuselmError::Gpu(format!("pipeline {label}: {e}")));
        }
        Ok(Self {
            pipeline,
            layout,
            slots: slots.to_vec(),
            label,
            group,
        })
    }

    /// A bind group with `buffers[i]` (a whole buffer or a view's range) at binding `i`. A range
    /// bound `read_write` may not overlap any other binding, and its buffer may not be bound
    /// read-only elsewhere (WebGPU validation would reject the dispatch; natively that is a
    /// panic), so that is checked here as a typed error.
    fn bind_group(&self, ctx: &GpuContext, buffers: &[Res<'_>]) -> Result<wgpu::BindGroup> {
        for (i, (slot, b)) in self.slots.iter().zip(buffers).enumerate() {
            let aliased = buffers.iter().enumerate().any(|(j, o)| {
                j != i
                    && (b.overlaps(o)
                        || (b.buffer == o.buffer && self.slots.get(j) != Some(&Slot::ReadWrite)))
            });
            if *slot == Slot::ReadWrite && aliased {
                return Err(FuselmError::InvalidArgument(format!(
                    "{}: the buffer written at binding {i} is also bound elsewhere",
                    self.label
                )));
            }
        }
        if self.slots.len() != buffers.len() {
            return Err(FuselmError::InvalidArgument(format!(
                "{}: {} buffers for {} bindings",
                self.label,
                buffers.len(),
                self.slots.len()
            )));
        }
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: if b.entire() {
                    b.buffer.as_entire_binding()
                } else {
                    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: b.buffer,
                        offset: b.offset,
                        size: wgpu::BufferSize::new(b.size),
                    })
                },
            })
            .collect();
        Ok(ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(self.label),
            layout: &self.layout,
            entries: &entries,
        }))
    }

    /// A [`Bound`] call: a uniform buffer holding `params` at binding 0, then `buffers`.
    pub(crate) fn bind<'b, P: bytemuck::Pod, B: Into<Res<'b>> + Copy>(
        &self,
        ctx: &GpuContext,
        params: &P,
        buffers: &[B],
    ) -> Result<Bound> {
        self.bind_uniform_bytes(ctx, bytemuck::bytes_of(params), buffers)
    }

    /// [`Pipeline::bind`] with the uniform's bytes given (an array of per-layer `Params`).
    pub(crate) fn bind_uniform_bytes<'b, B: Into<Res<'b>> + Copy>(
        &self,
        ctx: &GpuContext,
        params: &[u8],
        buffers: &[B],
    ) -> Result<Bound> {
        let uniform = ctx
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(self.label),
                contents: params,
                usage: wgpu::BufferUsages::UNIFORM,
            });
        self.bind_with_uniform(ctx, &uniform, buffers)
    }

    /// A [`Bound`] call with `uniform` at binding 0 (shared by several bind groups), then
    /// `buffers`.
    pub(crate) fn bind_with_uniform<'b, B: Into<Res<'b>> + Copy>(
        &self,
        ctx: &GpuContext,
        uniform: &wgpu::Buffer,
        buffers: &[B],
    ) -> Result<Bound> {
        let mut all: Vec<Res<'_>> = Vec::with_capacity(buffers.len() + 1);
        all.push(uniform.into());
        all.extend(buffers.iter().map(|b| (*b).into()));
        Ok(Bound {
            pipeline: self.pipeline.clone(),
            bind_group: self.bind_group(ctx, &all)?,
            group: self.group,
        })
    }

    /// A [`Bound`] call without a uniform (the layout starts at `buffers[0]`).
    pub(crate) fn bind_plain<'b, B: Into<Res<'b>> + Copy>(
        &self,
        ctx: &GpuContext,
        buffers: &[B],
    ) -> Result<Bound> {
        let all: Vec<Res<'_>> = buffers.iter().map(|b| (*b).into()).collect();
        Ok(Bound {
            pipeline: self.pipeline.clone(),
            bind_group: self.bind_group(ctx, &all)?,
            group: self.group,
        })
    }
}

/// A pipeline with one bind group, ready to dispatch into a pass.
#[derive(Debug, Clone)]
pub(crate) struct Bound {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    group: u32,
}

impl Bound {
    pub(crate) fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>, groups: [u32; 3]) {
        if groups.contains(&0) {
            return;
        }
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(self.group, &self.bind_group, &[]);
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
    }

    /// [`Bound::dispatch`] within a [`PassState`]: the bind group is set only when it is not
    /// already bound at its index, and the pipeline only when it changes.
    pub(crate) fn dispatch_tracked<'a>(
        &'a self,
        pass: &mut wgpu::ComputePass<'_>,
        state: &mut PassState<'a>,
        groups: [u32; 3],
    ) {
        if groups.contains(&0) {
            return;
        }
        if state.pipeline != Some(&self.pipeline) {
            pass.set_pipeline(&self.pipeline);
            state.pipeline = Some(&self.pipeline);
        }
        let slot = &mut state.groups[self.group as usize];
        if *slot != Some(&self.bind_group) {
            pass.set_bind_group(self.group, &self.bind_group, &[]);
            *slot = Some(&self.bind_group);
        }
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
    }
}

/// What a compute pass has set, so that [`Bound::dispatch_tracked`] skips the WebGPU calls
/// that would set it again (each costs the host microseconds in a browser). A dispatch
/// recorded with plain [`Bound::dispatch`] must be followed by [`PassState::touched`].
#[derive(Debug, Default)]
pub(crate) struct PassState<'a> {
    pipeline: Option<&'a wgpu::ComputePipeline>,
    groups: [Option<&'a wgpu::BindGroup>; 4],
}

impl PassState<'_> {
    /// After an untracked dispatch that set its pipeline and a bind group at `group`.
    pub(crate) fn touched(&mut self, group: u32) {
        self.pipeline = None;
        self.groups[group as usize] = None;
    }
}

/// Concatenates WGSL parts (common declarations, a weight decoder, the kernel) into one module.
pub(crate) fn compose(parts: &[&str]) -> String {
    parts.join("\n")
}

/// Folds `groups` workgroups into an (x, y) grid within maxComputeWorkgroupsPerDimension;
/// kernels recover the linear index as `x + y * num_workgroups.x` and bound-check it.
pub(crate) fn grid(groups: u64, max_per_dim: u32) -> Result<(u32, u32)> {
    let max = u64::from(max_per_dim.max(1));
    if groups <= max {
        return Ok((groups as u32, 1));
    }
    let y = groups.div_ceil(max);
    if y > max {
        return Err(FuselmError::LimitExceeded {
            limit: "maxComputeWorkgroupsPerDimension",
            needed: groups,
            available: max * max,
        });
    }
    Ok((max as u32, y as u32))
}

/// Checks one dispatch dimension against maxComputeWorkgroupsPerDimension.
pub(crate) fn check_dim(groups: u64, max_per_dim: u32) -> Result<u32> {
    if groups > u64::from(max_per_dim) {
        return Err(FuselmError::LimitExceeded {
            limit: "maxComputeWorkgroupsPerDimension",
            needed: groups,
            available: u64::from(max_per_dim),
        });
    }
    Ok(groups as u32)
}

/// Checks that `buffer` holds at least `elements` 4-byte values and is bindable as storage.
pub(crate) fn check_buffer<'a>(
    ctx: &GpuContext,
    what: &str,
    buffer: impl Into<Res<'a>>,
    elements: u64,
) -> Result<()> {
    check_bytes(ctx, what, buffer, elements.saturating_mul(4))
}

/// Checks that `buffer` holds at least `needed` bytes and is bindable as storage.
pub(crate) fn check_bytes<'a>(
    ctx: &GpuContext,
    what: &str,
    buffer: impl Into<Res<'a>>,
    needed: u64,
) -> Result<()> {
    let r: Res<'a> = buffer.into();
    if !r.buffer.usage().contains(wgpu::BufferUsages::STORAGE) {
        return Err(FuselmError::InvalidArgument(format!(
            "{what}: buffer lacks STORAGE usage"
        )));
    }
    if r.size < needed.max(4) {
        return Err(FuselmError::InvalidArgument(format!(
            "{what}: buffer of {} bytes, needs {needed}",
            r.size
        )));
    }
    check_binding_size(ctx, r.size)
}

/// Checks a whole-buffer storage binding against maxStorageBufferBindingSize.
pub(crate) fn check_binding_size(ctx: &GpuContext, bytes: u64) -> Result<()> {
    let available = ctx.device.limits().max_storage_buffer_binding_size;
    if bytes > available {
        return Err(FuselmError::LimitExceeded {
            limit: "maxStorageBufferBindingSize",
            needed: bytes,
            available,
        });
    }
    Ok(())
}

/// Checks `n_tokens` against the capacity a call was bound for.
pub(crate) fn check_tokens(what: &str, n_tokens: u32, capacity: u32) -> Result<()> {
    if n_tokens > capacity {
        return Err(FuselmError::InvalidArgument(format!(
            "{what}: {n_tokens} tokens, buffers bound for {capacity}"
        )));
    }
    Ok(())
}

/// Rejects zero or otherwise invalid dims with a message naming them.
pub(crate) fn require(cond: bool, what: &str) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(FuselmError::InvalidArgument(what.to_string()))
    }
}

pub(crate) fn max_groups(ctx: &GpuContext) -> u32 {
    ctx.device.limits().max_compute_workgroups_per_dimension
}
