//! The argument checks every kernel's `bind` runs: buffer sizes and usage, binding limits, token
//! capacity, dims.

use super::binding::Res;
use crate::error::{FuselmError, Result};
use crate::gpu::GpuContext;

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
