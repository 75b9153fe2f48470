//! Grid-barrier experiment (issue 9, step 0; development tool, native only): what one
//! cross-workgroup barrier costs inside a persistent kernel, and whether data written before it
//! is seen after it, on this adapter. Decides whether a persistent multi-workgroup kernel can
//! replace dependent dispatches (bench/MEGAKERNEL-DESIGN.md §3).
//!
//! One dispatch of `G` workgroups × 256 runs `R` rounds; each round ends in a grid barrier:
//! every invocation `storageBarrier()`, invocation 0 `atomicAdd(arrive, 1)` and spins until
//! `arrive >= G·(round + 1)` (at most `SPIN_MAX` polls, then it sets `error` and every workgroup
//! leaves), then `workgroupUniformLoad` + `storageBarrier()`. Bodies per round:
//!   `bar`: nothing; `body`: one 16-byte load from an L2-resident buffer + a 256-wide
//!   workgroup tree (the body `dispatch_cost` times as a dependent dispatch).
//! Litmus (message passing through the barrier): before round r's barrier each invocation
//! stores r + 1 into its slot of a double-buffered array (parity r % 2), plain stores; after the
//! barrier it reads the slot of the same invocation of workgroup (w + 1) % G and counts a
//! violation when it is not r + 1. Run once with the array declared plain and once `@coherent`
//! (wgpu's MEMORY_DECORATION_COHERENT, when the adapter has it).
//! µs per barrier = (t(R = 1100) − t(R = 100)) / 1000, GPU timestamps, median of 5.
//! Run: cargo run --release --example grid_barrier (GRID_MAX=n: grids up to n only)

use fuselm::gpu::GpuContext;

const SRC: &str = r#"
struct P { rounds: u32, groups: u32, mode: u32, spin_max: u32 }
// sync: [arrive, error, violations, max spins seen]
@group(0) @binding(0) var<storage, read_write> sync: array<atomic<u32>, 4>;
@group(0) @binding(1) DECORATION var<storage, read_write> slots: array<u32>;
@group(0) @binding(2) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;
@group(0) @binding(4) var<uniform> p: P;
var<workgroup> ok_sh: u32;
var<workgroup> red: array<u32, 256>;

// The grid barrier after round `b`; false when it timed out here or elsewhere.
fn grid_barrier(lid: u32, b: u32) -> bool {
    storageBarrier();
    if lid == 0u {
        atomicAdd(&sync[0], 1u);
        let goal = p.groups * (b + 1u);
        var ok = 1u;
        var spins = 0u;
        loop {
            if atomicLoad(&sync[0]) >= goal { break; }
            if atomicLoad(&sync[1]) != 0u { ok = 0u; break; }
            spins += 1u;
            if spins >= p.spin_max { atomicStore(&sync[1], 1u); ok = 0u; break; }
        }
        atomicMax(&sync[3], spins);
        ok_sh = ok;
    }
    let ok = workgroupUniformLoad(&ok_sh);
    storageBarrier();
    return ok != 0u;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let w = wg.x;
    let g = p.groups;
    var acc = 0u;
    var bad = 0u;
    for (var r = 0u; r < p.rounds; r++) {
        let half = (r % 2u) * g * 256u;
        if (p.mode & 1u) != 0u {
            slots[half + w * 256u + lid] = r + 1u;
        }
        if (p.mode & 2u) != 0u {
            let v = src[((w * 256u + lid) * 7u + r * 4099u) & 4095u];
            red[lid] = v.x ^ v.y ^ v.z ^ v.w ^ acc;
            for (var k = 128u; k > 0u; k >>= 1u) {
                workgroupBarrier();
                if lid < k { red[lid] += red[lid + k]; }
            }
            workgroupBarrier();
            acc = red[0];
            workgroupBarrier();
        }
        if !grid_barrier(lid, r) { break; }
        if (p.mode & 1u) != 0u {
            let seen = slots[half + ((w + 1u) % g) * 256u + lid];
            bad += select(0u, 1u, seen != r + 1u);
        }
    }
    if bad != 0u { atomicAdd(&sync[2], bad); }
    if lid == 0u { out[w] = acc; }
}
"#;

/// Polls before a barrier gives up: tens of ms on a GPU (one L2 atomic per poll), and under
/// llvmpipe's cap of 65,535 iterations per loop (gallivm ends longer loops silently, which would
/// look like a passed barrier).
const SPIN_MAX: u32 = 60_000;

struct Run {
    micros: f64,
    error: u32,
    violations: u32,
    max_spins: u32,
}

fn main() {
    pollster::block_on(run());
}

async fn run() {
    let ctx = GpuContext::new().await.expect("gpu");
    let d = &ctx.device;
    println!(
        "adapter: {} ({:?}, driver {})",
        ctx.info.name, ctx.info.backend, ctx.info.driver_info
    );
    let coherent = ctx.has(wgpu::Features::MEMORY_DECORATION_COHERENT);
    println!("MEMORY_DECORATION_COHERENT: {coherent}");
    let mut variants = vec![("plain", SRC.replace("DECORATION", ""))];
    if coherent {
        variants.push(("@coherent", SRC.replace("DECORATION", "@coherent")));
    }
    let buf = |size: u64, usage: wgpu::BufferUsages| {
        d.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage,
            mapped_at_creation: false,
        })
    };
    use wgpu::BufferUsages as U;
    const MAX_G: u32 = 4224;
    let sync = buf(16, U::STORAGE | U::COPY_DST | U::COPY_SRC);
    let slots = buf(2 * 256 * 4 * u64::from(MAX_G), U::STORAGE | U::COPY_DST);
    let src = buf(65536, U::STORAGE);
    let out = buf(4 * u64::from(MAX_G), U::STORAGE);
    let params = buf(16, U::UNIFORM | U::COPY_DST);
    let qs = d.create_query_set(&wgpu::QuerySetDescriptor {
        label: None,
        ty: wgpu::QueryType::Timestamp,
        count: 2,
    });
    let resolve = buf(16, U::QUERY_RESOLVE | U::COPY_SRC);
    let readback = buf(32, U::MAP_READ | U::COPY_DST);
    let period = f64::from(ctx.queue.get_timestamp_period());
    let grid_max: u32 = std::env::var("GRID_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MAX_G);
    for (decoration, source) in &variants {
        let module = ctx.shader("grid_barrier", source).await.expect("shader");
        let pipeline = ctx.pipeline("grid_barrier", &module, "main");
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[&sync, &slots, &src, &out, &params]
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource: b.as_entire_binding(),
                })
                .collect::<Vec<_>>(),
        });
        let time = |rounds: u32, groups: u32, mode: u32| -> Run {
            ctx.queue.write_buffer(
                &params,
                0,
                bytemuck::cast_slice(&[rounds, groups, mode, SPIN_MAX]),
            );
            let mut enc = d.create_command_encoder(&Default::default());
            enc.clear_buffer(&sync, 0, None);
            enc.clear_buffer(&slots, 0, None);
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
                pass.set_bind_group(0, &group, &[]);
                pass.dispatch_workgroups(groups, 1, 1);
            }
            enc.resolve_query_set(&qs, 0..2, &resolve, 0);
            enc.copy_buffer_to_buffer(&resolve, 0, &readback, 0, 16);
            enc.copy_buffer_to_buffer(&sync, 0, &readback, 16, 16);
            ctx.queue.submit([enc.finish()]);
            let slice = readback.slice(..);
            slice.map_async(wgpu::MapMode::Read, |_| {});
            d.poll(wgpu::PollType::wait_indefinitely()).expect("poll");
            let bytes = slice.get_mapped_range().expect("mapped").to_vec();
            readback.unmap();
            let t: &[u64] = bytemuck::cast_slice(&bytes[..16]);
            let s: &[u32] = bytemuck::cast_slice(&bytes[16..]);
            Run {
                micros: (t[1] - t[0]) as f64 * period / 1000.0,
                error: s[1],
                violations: s[2],
                max_spins: s[3],
            }
        };
        println!();
        println!("## {decoration} slots");
        println!("| grid | body | µs per barrier (median of 5: R 1100 − 100) | min..max | timeouts | litmus violations / reads | max spins |");
        println!("|---|---|---|---|---|---|---|");
        for groups in [1u32, 8, 66, 132, 264, 528, 1056, 2112, 4224] {
            if groups > grid_max {
                break;
            }
            for (mode, body) in [(1u32, "bar + litmus"), (3, "load + tree + litmus")] {
                let mut per = Vec::new();
                let (mut errors, mut violations, mut spins) = (0, 0u64, 0);
                for _ in 0..5 {
                    let short = time(100, groups, mode);
                    let long = time(1100, groups, mode);
                    per.push((long.micros - short.micros) / 1000.0);
                    errors += short.error + long.error;
                    violations += u64::from(short.violations) + u64::from(long.violations);
                    spins = spins.max(long.max_spins);
                }
                per.sort_by(f64::total_cmp);
                let reads = 5 * 1200 * 256 * u64::from(groups);
                println!(
                    "| {groups} | {body} | {:.2} | {:.2}..{:.2} | {errors} | {violations} / {reads} | {spins} |",
                    per[2], per[0], per[4]
                );
                if errors > 0 {
                    break;
                }
            }
        }
    }
}
