//! Timing one compute pass: GPU timestamps at the pass boundaries when the adapter has
//! `timestamp-query`, and always the host clock around submit → completion.

use crate::clock::now_seconds;
use crate::error::Result;
use crate::gpu::{read_buffer, wait_idle, GpuContext};

/// One timed pass: GPU seconds when timestamps worked, and host seconds.
pub struct PassTime {
    pub gpu: Option<f64>,
    pub wall: f64,
}

pub struct PassTimer {
    queries: Option<(wgpu::QuerySet, wgpu::Buffer)>,
    period_ns: f64,
}

impl PassTimer {
    pub fn new(ctx: &GpuContext) -> Self {
        let queries = ctx.has(wgpu::Features::TIMESTAMP_QUERY).then(|| {
            let set = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("probe timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            });
            let resolve = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("probe timestamp resolve"),
                size: 16,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            (set, resolve)
        });
        Self {
            queries,
            period_ns: f64::from(ctx.queue.get_timestamp_period()),
        }
    }

    /// Encodes one compute pass with `record`, submits it, waits for it and returns its times.
    pub async fn time_pass(
        &self,
        ctx: &GpuContext,
        record: impl FnOnce(&mut wgpu::ComputePass<'_>),
    ) -> Result<PassTime> {
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        {
            let timestamp_writes =
                self.queries
                    .as_ref()
                    .map(|(set, _)| wgpu::ComputePassTimestampWrites {
                        query_set: set,
                        beginning_of_pass_write_index: Some(0),
                        end_of_pass_write_index: Some(1),
                    });
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("probe timed pass"),
                timestamp_writes,
            });
            record(&mut pass);
        }
        if let Some((set, resolve)) = &self.queries {
            encoder.resolve_query_set(set, 0..2, resolve, 0);
        }
        let start = now_seconds();
        ctx.queue.submit([encoder.finish()]);
        wait_idle(&ctx.device, &ctx.queue).await?;
        let wall = now_seconds() - start;
        let gpu = match &self.queries {
            Some((_, resolve)) => {
                let bytes = read_buffer(&ctx.device, &ctx.queue, resolve, 0, 16).await?;
                let begin = u64::from_le_bytes(bytes[0..8].try_into().unwrap_or_default());
                let end = u64::from_le_bytes(bytes[8..16].try_into().unwrap_or_default());
                // Some drivers return zeros or non-monotonic values; those samples are not trusted.
                (begin != 0 && end > begin).then(|| (end - begin) as f64 * self.period_ns * 1e-9)
            }
            None => None,
        };
        Ok(PassTime { gpu, wall })
    }
}
