//! The per-layer vector arena ([`super::shape::LayerVectors`]) as the kernels read it: the offset
//! of an absent vector, and the checks that every vector a kernel reads lies within the arena.

use crate::error::Result;
use crate::gpu::GpuContext;
use crate::kernels::checks::{check_buffer, require};

/// Offset of an absent vector in [`LayerVectors`](super::shape::LayerVectors) (`NONE` in WGSL).
pub const NO_VECTOR: u32 = u32::MAX;

/// Length a vector must have when its switch is on, or 0 (not read) when it is off.
pub(super) fn flag_len(on: bool, len: u32) -> u32 {
    if on {
        len
    } else {
        0
    }
}

/// Every (offset, length) a kernel will read from the vector arena must lie within it and be
/// vec4-aligned; length 0: not read (its offset is ignored).
pub(super) fn check_vectors(
    ctx: &GpuContext,
    vecs: &wgpu::Buffer,
    wanted: &[(u32, u32)],
) -> Result<()> {
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
