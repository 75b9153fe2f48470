//! `fuselm probe [--bench] [--json]`.

use fuselm::probe::{AdapterReport, Measurement, ProbeOptions};
use std::error::Error;

#[derive(clap::Args)]
pub struct ProbeArgs {
    /// Also run the micro-benchmarks (dispatch cost, round trip, read bandwidth).
    #[arg(long)]
    bench: bool,
    /// Print the report as JSON (the same shape as the TypeScript `AdapterReport`).
    #[arg(long)]
    json: bool,
    /// Bytes streamed per bandwidth run (default 256 MiB, clamped to the binding limit).
    #[arg(long)]
    bench_bytes: Option<u64>,
    /// Timed runs per measurement (default 7).
    #[arg(long)]
    runs: Option<u32>,
}

pub fn run(args: ProbeArgs) -> Result<(), Box<dyn Error>> {
    let options = ProbeOptions {
        bench: Some(args.bench),
        bench_bytes: args.bench_bytes,
        runs: args.runs,
    };
    let report = pollster::block_on(fuselm::probe(&options))?;
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_human(&report)?;
    }
    Ok(())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

fn print_human(r: &AdapterReport) -> std::io::Result<()> {
    let a = &r.adapter;
    out!(
        "adapter      {} ({}, {})",
        a.device,
        a.backend,
        a.device_type
    );
    out!("vendor       {}  {}", a.vendor, a.description);
    if a.is_software {
        out!("             software adapter: expect CPU speed");
    }
    let f = &r.features;
    out!(
        "features     shader-f16 {}  subgroups {} ({}..{})  timestamp-query {}",
        f.shader_f16,
        f.subgroups,
        f.subgroup_min_size,
        f.subgroup_max_size,
        f.timestamp_query
    );
    let (l, d) = (&r.limits, &r.webgpu_defaults);
    out!(
        "limits       {:<40} {:>14} {:>14}",
        "",
        "adapter",
        "webgpu default"
    );
    let rows: [(&str, u64, u64); 8] = [
        (
            "maxStorageBufferBindingSize",
            l.max_storage_buffer_binding_size,
            d.max_storage_buffer_binding_size,
        ),
        ("maxBufferSize", l.max_buffer_size, d.max_buffer_size),
        (
            "maxComputeWorkgroupStorageSize",
            l.max_compute_workgroup_storage_size.into(),
            d.max_compute_workgroup_storage_size.into(),
        ),
        (
            "maxComputeInvocationsPerWorkgroup",
            l.max_compute_invocations_per_workgroup.into(),
            d.max_compute_invocations_per_workgroup.into(),
        ),
        (
            "maxComputeWorkgroupSizeX",
            l.max_compute_workgroup_size_x.into(),
            d.max_compute_workgroup_size_x.into(),
        ),
        (
            "maxComputeWorkgroupsPerDimension",
            l.max_compute_workgroups_per_dimension.into(),
            d.max_compute_workgroups_per_dimension.into(),
        ),
        (
            "maxStorageBuffersPerShaderStage",
            l.max_storage_buffers_per_shader_stage.into(),
            d.max_storage_buffers_per_shader_stage.into(),
        ),
        (
            "maxUniformBufferBindingSize",
            l.max_uniform_buffer_binding_size,
            d.max_uniform_buffer_binding_size,
        ),
    ];
    for (name, adapter, default) in rows {
        out!("             {name:<40} {adapter:>14} {default:>14}");
    }
    let fit = &r.fit;
    out!(
        "fit          largest tensor {}  weights per dispatch {}",
        mib(fit.max_tensor_bytes),
        mib(fit.max_weight_bytes_per_dispatch)
    );
    out!(
        "             f16 kernels {}  subgroup kernels {}  resident dim f32 {} / f16 {}",
        fit.f16_kernels,
        fit.subgroup_kernels,
        fit.max_resident_dim_f32,
        fit.max_resident_dim_f16
    );
    if let Some(b) = &r.bench {
        let show = |name: &str, m: &Measurement| -> std::io::Result<()> {
            out!(
                "bench        {name:<34} median {:>10.2} {:<5} (min {:.2}, max {:.2}; {:?})",
                m.median,
                m.unit,
                m.min,
                m.max,
                m.timer
            );
            Ok(())
        };
        show("dependent dispatch (one pass)", &b.dependent_dispatch)?;
        show("submit + readback", &b.submit_and_readback)?;
        show("read, 1 workgroup", &b.read_bandwidth_one_workgroup)?;
        show(
            &format!("read, {} workgroups", b.many_workgroups),
            &b.read_bandwidth_many_workgroups,
        )?;
        out!("             ({} read per run)", mib(b.read_bytes));
    }
    Ok(())
}
