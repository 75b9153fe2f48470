//! `probe({ bench: true })`: micro-benchmarks of the three costs fuselm's design rests on —
//! a dependent dispatch inside one pass, a submit-and-readback round trip, and read bandwidth
//! with one workgroup versus many.

use super::report::{BenchReport, Measurement, ProbeOptions, TimerKind};
use super::timer::{PassTime, PassTimer};
use crate::clock::now_seconds;
use crate::error::{FuselmError, Result};
use crate::gpu::{map_read, read_buffer, GpuContext};
use crate::shaders;

const DEFAULT_READ_BYTES: u64 = 256 << 20;
const DEFAULT_RUNS: u32 = 7;
/// Extra dispatches in the long chain; the short chain has `CHAIN_BASE`.
const CHAIN_EXTRA: u32 = 256;
const CHAIN_BASE: u32 = 8;
const MANY_WORKGROUPS: u32 = 1024;
const WORKGROUP_SIZE: u64 = 256;

pub async fn run(ctx: &GpuContext, options: &ProbeOptions) -> Result<BenchReport> {
    let runs = options.runs.unwrap_or(DEFAULT_RUNS).clamp(1, 1000);
    let timer = PassTimer::new(ctx);
    let (dependent_dispatch, chain_length) = dependent_dispatch(ctx, &timer, runs).await?;
    let submit_and_readback = submit_and_readback(ctx, runs).await?;
    let bandwidth = Bandwidth::new(ctx, options).await?;
    let many = MANY_WORKGROUPS.min(ctx.device.limits().max_compute_workgroups_per_dimension);
    let read_bandwidth_one_workgroup = bandwidth.measure(ctx, &timer, 1, runs).await?;
    let read_bandwidth_many_workgroups = bandwidth.measure(ctx, &timer, many, runs).await?;
    Ok(BenchReport {
        dependent_dispatch,
        chain_length,
        submit_and_readback,
        read_bandwidth_one_workgroup,
        read_bandwidth_many_workgroups,
        many_workgroups: many,
        read_bytes: bandwidth.bytes,
    })
}

/// Median and spread of samples taken with one timer.
fn measurement(samples: Vec<f64>, unit: &str, timer: TimerKind) -> Measurement {
    let mut sorted = samples.clone();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    Measurement {
        median,
        min: sorted.first().copied().unwrap_or(f64::NAN),
        max: sorted.last().copied().unwrap_or(f64::NAN),
        unit: unit.to_string(),
        timer,
        samples,
    }
}

/// Picks GPU-timestamp samples when every run produced one, else host-clock samples.
fn choose(times: &[(PassTime, PassTime)]) -> (Vec<(f64, f64)>, TimerKind) {
    let gpu: Option<Vec<(f64, f64)>> = times.iter().map(|(a, b)| Some((a.gpu?, b.gpu?))).collect();
    match gpu {
        Some(pairs) => (pairs, TimerKind::TimestampQuery),
        None => (
            times.iter().map(|(a, b)| (a.wall, b.wall)).collect(),
            TimerKind::WallClock,
        ),
    }
}

fn storage_buffer(ctx: &GpuContext, label: &str, size: u64) -> wgpu::Buffer {
    ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

fn bind_group(
    ctx: &GpuContext,
    pipeline: &wgpu::ComputePipeline,
    buffers: &[&wgpu::Buffer],
) -> wgpu::BindGroup {
    let entries: Vec<wgpu::BindGroupEntry> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| wgpu::BindGroupEntry {
            binding: i as u32,
            resource: b.as_entire_binding(),
        })
        .collect();
    ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    })
}

/// Per-dispatch cost (µs) from two chains of different length in one pass each.
async fn dependent_dispatch(
    ctx: &GpuContext,
    timer: &PassTimer,
    runs: u32,
) -> Result<(Measurement, u32)> {
    let module = ctx.shader("bench_chain", shaders::BENCH_CHAIN).await?;
    let pipeline = ctx.pipeline("bench_chain", &module, "step");
    let cell = storage_buffer(ctx, "bench chain cell", 4);
    ctx.queue.write_buffer(&cell, 0, &0u32.to_le_bytes());
    let bg = bind_group(ctx, &pipeline, &[&cell]);
    let chain = |n: u32| {
        let (pipeline, bg) = (&pipeline, &bg);
        move |pass: &mut wgpu::ComputePass<'_>| {
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, bg, &[]);
            for _ in 0..n {
                pass.dispatch_workgroups(1, 1, 1);
            }
        }
    };
    let long = CHAIN_BASE + CHAIN_EXTRA;
    let mut issued: u64 = 0;
    let mut times = Vec::new();
    for i in 0..=runs {
        let short_t = timer.time_pass(ctx, chain(CHAIN_BASE)).await?;
        let long_t = timer.time_pass(ctx, chain(long)).await?;
        issued += u64::from(CHAIN_BASE + long);
        if i > 0 {
            times.push((short_t, long_t)); // run 0 is the warm-up
        }
    }
    // Every dispatch must have run, in order, for the numbers to mean anything.
    let bytes = read_buffer(&ctx.device, &ctx.queue, &cell, 0, 4).await?;
    let count = u64::from(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]));
    if count != issued {
        return Err(FuselmError::Gpu(format!(
            "dependent-dispatch benchmark: {count} of {issued} increments landed"
        )));
    }
    let (pairs, kind) = choose(&times);
    let samples = pairs
        .iter()
        .map(|(short, long)| (long - short) / f64::from(CHAIN_EXTRA) * 1e6)
        .collect();
    Ok((measurement(samples, "us", kind), long))
}

/// One tiny dispatch, a 4-byte copy to a mappable buffer, and the map: a CPU round trip (µs).
async fn submit_and_readback(ctx: &GpuContext, runs: u32) -> Result<Measurement> {
    let module = ctx.shader("bench_chain", shaders::BENCH_CHAIN).await?;
    let pipeline = ctx.pipeline("bench_chain", &module, "step");
    let cell = storage_buffer(ctx, "bench round-trip cell", 4);
    let bg = bind_group(ctx, &pipeline, &[&cell]);
    let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("bench round-trip staging"),
        size: 4,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut samples = Vec::new();
    for i in 0..=runs {
        let start = now_seconds();
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bg, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        encoder.copy_buffer_to_buffer(&cell, 0, &staging, 0, 4);
        ctx.queue.submit([encoder.finish()]);
        map_read(&ctx.device, &staging).await?;
        staging.unmap();
        if i > 0 {
            samples.push((now_seconds() - start) * 1e6);
        }
    }
    Ok(measurement(samples, "us", TimerKind::WallClock))
}

struct Bandwidth {
    bytes: u64,
    src: wgpu::Buffer,
    sink: wgpu::Buffer,
    pipeline: wgpu::ComputePipeline,
}

impl Bandwidth {
    async fn new(ctx: &GpuContext, options: &ProbeOptions) -> Result<Self> {
        let limits = ctx.device.limits();
        let cap = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        let bytes = options.bench_bytes.unwrap_or(DEFAULT_READ_BYTES).min(cap) / 16 * 16;
        if bytes == 0 {
            return Err(FuselmError::InvalidArgument(
                "benchBytes must be at least 16".into(),
            ));
        }
        let src = storage_buffer(ctx, "bench read src", bytes);
        let sink_len = u64::from(MANY_WORKGROUPS) * WORKGROUP_SIZE * 4;
        let sink = storage_buffer(ctx, "bench read sink", sink_len);
        let fill_module = ctx.shader("bench_fill", shaders::BENCH_FILL).await?;
        let fill = ctx.pipeline("bench_fill", &fill_module, "fill");
        let fill_bg = bind_group(ctx, &fill, &[&src]);
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&fill);
            pass.set_bind_group(0, &fill_bg, &[]);
            pass.dispatch_workgroups(
                MANY_WORKGROUPS.min(limits.max_compute_workgroups_per_dimension),
                1,
                1,
            );
        }
        ctx.queue.submit([encoder.finish()]);
        let module = ctx.shader("bench_read", shaders::BENCH_READ).await?;
        let pipeline = ctx.pipeline("bench_read", &module, "read_all");
        Ok(Self {
            bytes,
            src,
            sink,
            pipeline,
        })
    }

    /// GB/s reading `self.bytes` with `workgroups` workgroups. GPU timestamps time one read;
    /// the host clock times passes of 1 and 3 reads and takes half the difference, which
    /// cancels the submit/wait latency.
    async fn measure(
        &self,
        ctx: &GpuContext,
        timer: &PassTimer,
        workgroups: u32,
        runs: u32,
    ) -> Result<Measurement> {
        let bg = bind_group(ctx, &self.pipeline, &[&self.src, &self.sink]);
        let reads = |n: u32| {
            let (pipeline, bg) = (&self.pipeline, &bg);
            move |pass: &mut wgpu::ComputePass<'_>| {
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, bg, &[]);
                for _ in 0..n {
                    pass.dispatch_workgroups(workgroups, 1, 1);
                }
            }
        };
        let mut times = Vec::new();
        for i in 0..=runs {
            let one = timer.time_pass(ctx, reads(1)).await?;
            let three = if one.gpu.is_some() {
                None
            } else {
                Some(timer.time_pass(ctx, reads(3)).await?)
            };
            if i > 0 {
                times.push((one, three));
            }
        }
        let gb = self.bytes as f64 / 1e9;
        if let Some(gpu) = times
            .iter()
            .map(|(one, _)| one.gpu)
            .collect::<Option<Vec<f64>>>()
        {
            let samples = gpu.iter().map(|t| gb / t).collect();
            return Ok(measurement(samples, "GB/s", TimerKind::TimestampQuery));
        }
        let samples = times
            .iter()
            .map(|(one, three)| {
                let three = three.as_ref().map_or(one.wall * 3.0, |t| t.wall);
                gb / ((three - one.wall) / 2.0)
            })
            .collect();
        Ok(measurement(samples, "GB/s", TimerKind::WallClock))
    }
}
