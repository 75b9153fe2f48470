//! Where a fused decode step's time goes: every dispatch of one step timed on its own with GPU
//! timestamps (the host clock when the adapter has no timestamp-query), summed per kernel role,
//! with the bytes each role must stream and the bandwidth that implies; and the whole step
//! timed as one pass, to show what the dependent-dispatch chain costs beyond the kernels.

use super::generation::{GenerationRequest, Strategy};
use super::gpu_model::GpuModel;
use crate::error::Result;
use crate::kernels::PassState;
use crate::probe::timer::PassTimer;
use crate::sampling::SamplingOptions;
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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

impl GpuModel {
    /// Profiles one fused greedy decode step after `prompt` (+ a few generated tokens), each
    /// dispatch timed `reps` times (median).
    pub async fn profile_fused(&mut self, prompt: &[u32], reps: u32) -> Result<StepProfile> {
        let request = GenerationRequest {
            prompt,
            max_tokens: 4,
            strategy: Strategy::Fused,
            sampler: SamplingOptions::default().resolve(&[])?,
            chunk_tokens: 4,
            reuse_prefix: false,
        };
        self.generate(&request, &mut |_| true).await?;
        let len = prompt.len() as u32 + 4;
        let fused = self.fused.as_ref().map_err(|e| {
            crate::error::FuselmError::InvalidArgument(format!("fused strategy unavailable: {e}"))
        })?;
        let c = &self.config;
        let kv_bytes = 2 * u64::from(c.head_dim) * self.kv_bytes_per_value();
        let timer = PassTimer::new(&self.ctx);
        let mut calls = fused.decode.roles(len, kv_bytes);
        calls.extend(fused.choice.roles(self.head_bytes()));
        let mut roles: Vec<RoleProfile> = Vec::new();
        let mut wall_clock = false;
        for call in &calls {
            let mut times = Vec::new();
            for _ in 0..reps.max(1) {
                let t = timer.time_pass(&self.ctx, |p| (call.record)(p)).await?;
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
        // The whole step in one pass (the choice advances the state each time: harmless here).
        let mut steps = Vec::new();
        for _ in 0..reps.max(1) {
            let t = timer
                .time_pass(&self.ctx, |p| {
                    let _ = fused.decode.record_body(p, &mut PassState::default(), len);
                    fused.choice.record(p, false);
                })
                .await?;
            steps.push(t.gpu.unwrap_or(t.wall) * 1e6);
        }
        Ok(StepProfile {
            timer: if wall_clock {
                "wall-clock"
            } else {
                "timestamp-query"
            }
            .into(),
            context: len,
            sum_of_roles_microseconds: roles.iter().map(|r| r.microseconds_per_step).sum(),
            roles,
            step_microseconds: median(steps),
        })
    }
}
