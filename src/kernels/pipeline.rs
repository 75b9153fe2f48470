//! A kernel's compiled pipeline with its explicit bind-group layout ([`Pipeline`]), a call bound
//! to its buffers ([`Bound`]), what a pass has set ([`PassState`]), and how a kernel's WGSL is
//! assembled ([`compose`]).

use super::binding::Res;
use crate::error::{FuselmError, Result};
use crate::gpu::{CachedPipeline, GpuContext, PipelineKey};

/// How one binding of a kernel's explicit layout is declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Uniform,
    Read,
    ReadWrite,
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
        Self::compile(ctx, label, source, slots, 0, false).await
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
        Self::compile(ctx, label, source, slots, group, false).await
    }

    /// [`Pipeline::new`] for source that is not ours (a user's simulation environment):
    /// compiled with all of WebGPU's runtime checks, including forced loop bounding.
    pub(crate) async fn new_checked(
        ctx: &GpuContext,
        label: &'static str,
        source: &str,
        slots: &[Slot],
    ) -> Result<Self> {
        Self::compile(ctx, label, source, slots, 0, true).await
    }

    /// The pipeline from the device's cache ([`GpuContext::cached_pipeline`]), or compiled:
    /// `checked` for WGSL that is not ours ([`GpuContext::shader_checked`]).
    async fn compile(
        ctx: &GpuContext,
        label: &'static str,
        source: &str,
        slots: &[Slot],
        group: u32,
        checked: bool,
    ) -> Result<Self> {
        let mut layout: Vec<u8> = group.to_le_bytes().to_vec();
        layout.extend(slots.iter().map(|s| *s as u8));
        let key = PipelineKey {
            label: label.to_string(),
            source: source.to_string(),
            layout,
            checked: checked || ctx.options().force_loop_bounding,
        };
        let made = ctx
            .cached_pipeline(key, || async {
                let module = if checked {
                    ctx.shader_checked(label, source).await?
                } else {
                    ctx.shader(label, source).await?
                };
                Self::from_module(ctx, label, &module, slots, group).await
            })
            .await?;
        Ok(Self {
            pipeline: made.pipeline,
            layout: made.layout,
            slots: slots.to_vec(),
            label,
            group,
        })
    }

    async fn from_module(
        ctx: &GpuContext,
        label: &'static str,
        module: &wgpu::ShaderModule,
        slots: &[Slot],
        group: u32,
    ) -> Result<CachedPipeline> {
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
        Ok(CachedPipeline { pipeline, layout })
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
        let uniform = ctx.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(self.label),
            contents: params,
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let mut bound = self.bind_with_uniform(ctx, &uniform, buffers)?;
        bound.uniform = Some(uniform);
        Ok(bound)
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
            uniform: None,
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
            uniform: None,
        })
    }
}

/// A pipeline with one bind group, ready to dispatch into a pass.
#[derive(Debug, Clone)]
pub(crate) struct Bound {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    group: u32,
    /// The uniform buffer made for this call alone ([`Pipeline::bind_uniform_bytes`]).
    uniform: Option<wgpu::Buffer>,
}

impl Bound {
    /// Destroys the uniform buffer made for this call (for a call bound for one generation; its
    /// clones must not be used after).
    pub(crate) fn release(&self, ctx: &GpuContext) {
        if let Some(u) = &self.uniform {
            ctx.release(u);
        }
    }

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
