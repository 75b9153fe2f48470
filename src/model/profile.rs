//! Where a decode step's time goes: every dispatch of one step timed on its own with GPU
//! timestamps (the host clock when the adapter has no timestamp-query), summed per kernel role,
//! with the bytes each role must stream and the bandwidth that implies; and the whole step
//! timed as one pass, to show what the dependent-dispatch chain costs beyond the kernels. A
//! strategy that can be profiled (fused) hands its step over as [`RoleCall`]s.

use crate::error::Result;
use crate::gpu::GpuContext;
use crate::probe::timer::PassTimer;
use serde::{Deserialize, Serialize};

/// One kernel role of the fused step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct RoleProfile {
    pub role: String,
    pub dispatches_per_step: u32,
    /// Median time of one dispatch, summed over the step's dispatches of this role (µs).
    pub microseconds_per_step: f64,
    pub bytes_per_step: u64,
    /// bytes_per_step / microseconds_per_step.
    pub gigabytes_per_second: f64,
}

/// A fused decode step, profiled.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct StepProfile {
    /// "timestamp-query" or "wall-clock".
    pub timer: String,
    /// Positions the profiled step attends to.
    pub context: u32,
    pub roles: Vec<RoleProfile>,
    /// Sum of the roles (µs): kernels timed one at a time.
    pub sum_of_roles_microseconds: f64,
    /// The whole step recorded in one pass, median (µs).
    pub step_microseconds: f64,
}

/// One dispatch of a decode step, for profiling: its role and the bytes it must stream.
pub struct RoleCall<'a> {
    pub role: &'static str,
    pub bytes: u64,
    pub record: Box<dyn Fn(&mut wgpu::ComputePass<'_>) + 'a>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

/// Times each of `calls` (`reps` times, median) and the whole step `step` in one pass, at
/// `context` positions.
pub(crate) async fn profile_step(
    ctx: &GpuContext,
    calls: &[RoleCall<'_>],
    step: impl Fn(&mut wgpu::ComputePass<'_>),
    context: u32,
    reps: u32,
) -> Result<StepProfile> {
    let timer = PassTimer::new(ctx);
    let mut roles: Vec<RoleProfile> = Vec::new();
    let mut wall_clock = false;
    for call in calls {
        let mut times = Vec::new();
        for _ in 0..reps.max(1) {
            let t = timer.time_pass(ctx, |p| (call.record)(p)).await?;
            wall_clock |= t.gpu.is_none();
            times.push(t.gpu.unwrap_or(t.wall) * 1e6);
        }
        let us = median(times);
        match roles.iter_mut().find(|r| r.role == call.role) {
            Some(r) => {
                r.dispatches_per_step += 1;
                r.microseconds_per_step += us;
                r.bytes_per_step += call.bytes;
            }
            None => roles.push(RoleProfile {
                role: call.role.to_string(),
                dispatches_per_step: 1,
                microseconds_per_step: us,
                bytes_per_step: call.bytes,
                gigabytes_per_second: 0.0,
            }),
        }
    }
    for r in &mut roles {
        r.gigabytes_per_second = r.bytes_per_step as f64 / (r.microseconds_per_step * 1e3);
    }
    let mut steps = Vec::new();
    for _ in 0..reps.max(1) {
        let t = timer.time_pass(ctx, &step).await?;
        steps.push(t.gpu.unwrap_or(t.wall) * 1e6);
    }
    Ok(StepProfile {
        timer: if wall_clock {
            "wall-clock"
        } else {
            "timestamp-query"
        }
        .into(),
        context,
        sum_of_roles_microseconds: roles.iter().map(|r| r.microseconds_per_step).sum(),
        roles,
        step_microseconds: median(steps),
    })
}
