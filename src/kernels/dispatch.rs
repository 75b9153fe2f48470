//! Dispatch sizes within the device's limits on workgroups per dimension.

use crate::error::{FuselmError, Result};
use crate::gpu::GpuContext;

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

/// The device's maxComputeWorkgroupsPerDimension.
pub(crate) fn max_groups(ctx: &GpuContext) -> u32 {
    ctx.device.limits().max_compute_workgroups_per_dimension
}
