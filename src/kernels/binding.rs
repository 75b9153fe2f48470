//! What a kernel binding holds: a whole buffer or a range of one ([`BufferView`], [`Res`]), and
//! buffers that stack one slot per layer ([`stack_views`]).

use crate::gpu::GpuContext;

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
    let buffer = ctx.create_buffer(&wgpu::BufferDescriptor {
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
    pub(crate) fn entire(&self) -> bool {
        self.offset == 0 && self.size == self.buffer.size()
    }
    pub(crate) fn overlaps(&self, o: &Res<'_>) -> bool {
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
