//! How many lanes (invocations) of a fused matrix-vector kernel share one output row.

/// Lanes (invocations) per output row of a fused matrix-vector kernel whose rows have `units`
/// 8-value units: the fewest powers of two from 32 up to `max` that leave each lane at most
/// two units. At batch 1 these kernels are bound by each warp's chain of dependent
/// instructions, not by memory (a workgroup per SM leaves nothing to hide latency with), so
/// spreading a row over more lanes shortens every warp's work; a row wider than one subgroup
/// costs one extra barrier to combine. `tuned` (`KernelTuning::lanes`) overrides it, to
/// measure the alternatives on one device.
pub fn lanes_for(units: u32, max: u32, tuned: Option<u32>) -> u32 {
    if let Some(l) = tuned {
        return l.min(max);
    }
    let mut lanes = 32;
    while lanes < max && units > 2 * lanes {
        lanes *= 2;
    }
    lanes
}
