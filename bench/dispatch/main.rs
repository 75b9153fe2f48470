//! Dispatch-cost experiment (development tool, native only): how long one dependent dispatch
//! takes inside one compute pass, as a function of its grid and body, measured with GPU
//! timestamps as the difference of two chain lengths. Variants:
//!   `G` workgroups of 256 invocations; body `load` (one 16-byte load per invocation from a
//!   buffer that fits in L2, or `dram`: from a 1 GiB buffer, new addresses every dispatch),
//!   `tree` (+ a 256-wide workgroup-memory tree reduction: 8 barriers), `sg` (+ subgroupAdd).
//! Every dispatch reads and writes `out`, so each waits for the previous one.
//! Run: cargo run --release --example dispatch_cost

use fuselm::gpu::GpuContext;

const SRC: &str = r#"
struct P { salt: u32, mask: u32, mode: u32, _p: u32 }
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: P;
var<workgroup> red: array<u32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = ((wg.x * 256u + lid) * 7u + p.salt * nwg.x * 256u) & p.mask;
    let v = src[i];
    var s = v.x ^ v.y ^ v.z ^ v.w ^ out[wg.x];
    if p.mode >= 1u {
        red[lid] = s;
        for (var k = 128u; k > 0u; k >>= 1u) {
            workgroupBarrier();
            if lid < k { red[lid] += red[lid + k]; }
        }
        workgroupBarrier();
        s = red[0];
    }
    if lid == 0u { out[wg.x] = s; }
}
"#;

fn main() {
    pollster::block_on(run());
}

async fn run() {
    let ctx = GpuContext::new().await.expect("gpu");
    let d = &ctx.device;
    println!("adapter: {} ({:?})", ctx.info.name, ctx.info.backend);
    let module = ctx.shader("dispatch_cost", SRC).await.expect("shader");
    let pipeline = ctx.pipeline("dispatch_cost", &module, "main");
    let big: u64 = (1u64 << 30).min(d.limits().max_storage_buffer_binding_size);
    let src = d.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: big,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let out = d.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 4 * 4096,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let qs = d.create_query_set(&wgpu::QuerySetDescriptor {
        label: None,
        ty: wgpu::QueryType::Timestamp,
        count: 2,
    });
    let resolve = d.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let readback = d.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let period = f64::from(ctx.queue.get_timestamp_period());
    // One bind group per salt: consecutive dispatches read different addresses.
    let groups: Vec<(wgpu::BindGroup, wgpu::BindGroup, wgpu::BindGroup)> = (0..64u32)
        .map(|salt| {
            let mk = |mask: u32, mode: u32| {
                let u = wgpu::util::DeviceExt::create_buffer_init(
                    d,
                    &wgpu::util::BufferInitDescriptor {
                        label: None,
                        contents: bytemuck::cast_slice(&[salt, mask, mode, 0u32]),
                        usage: wgpu::BufferUsages::UNIFORM,
                    },
                );
                d.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: None,
                    layout: &pipeline.get_bind_group_layout(0),
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: src.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 1,
                            resource: out.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 2,
                            resource: u.as_entire_binding(),
                        },
                    ],
                })
            };
            // L2-resident (64 KiB window), L2 + tree, DRAM (1 GiB window) + tree
            (mk(4095, 0), mk(4095, 1), mk(((big / 16) - 1) as u32, 1))
        })
        .collect();
    let time = |n: u32, g: u32, which: usize| {
        let mut enc = d.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &qs,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                }),
            });
            pass.set_pipeline(&pipeline);
            for i in 0..n {
                let b = &groups[(i % 64) as usize];
                let bg = match which {
                    0 => &b.0,
                    1 => &b.1,
                    _ => &b.2,
                };
                pass.set_bind_group(0, bg, &[]);
                pass.dispatch_workgroups(g, 1, 1);
            }
        }
        enc.resolve_query_set(&qs, 0..2, &resolve, 0);
        enc.copy_buffer_to_buffer(&resolve, 0, &readback, 0, 16);
        ctx.queue.submit([enc.finish()]);
        let slice = readback.slice(..);
        slice.map_async(wgpu::MapMode::Read, |_| {});
        d.poll(wgpu::PollType::wait_indefinitely()).expect("poll");
        let t: Vec<u64> = bytemuck::cast_slice(&slice.get_mapped_range().expect("mapped")).to_vec();
        readback.unmap();
        (t[1] - t[0]) as f64 * period / 1000.0
    };
    println!("| grid | body | us per dispatch (median of 7, chain 400 - 100) |");
    println!("|---|---|---|");
    for g in [1u32, 8, 72, 132, 264, 528, 1536, 4096] {
        for (which, name) in [
            (0, "load (L2)"),
            (1, "load (L2) + tree"),
            (2, "load (DRAM) + tree"),
        ] {
            let mut v: Vec<f64> = (0..7)
                .map(|_| (time(400, g, which) - time(100, g, which)) / 300.0)
                .collect();
            v.sort_by(f64::total_cmp);
            println!(
                "| {g} | {name} | {:.2} (min {:.2}, max {:.2}) |",
                v[3], v[0], v[6]
            );
        }
    }
}
