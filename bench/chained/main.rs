//! Chained-phases experiment (development tool, native only): can the dependent stages of a
//! decode step run inside ONE dispatch, each stage's workgroups waiting on a counter that the
//! previous stage's workgroups increment, instead of one dependent dispatch per stage? And
//! does issuing each stage's weight loads before its wait hide them behind the wait?
//!
//! A chain of `P` phases of `G` workgroups × 256. Phase k, workgroup j: load `NV` vec4 of
//! "weights" per invocation (fresh DRAM addresses every phase: a 1 GiB buffer walked once),
//! read the previous phase's output vector (G floats, one per invocation: the dependent load),
//! dot, a 256-wide workgroup tree, and write one float of phase k's output (double-buffered by
//! phase parity, with a tag for the message-passing litmus). Modes:
//!   `dispatch`: one dependent dispatch per phase (what the fused step does today);
//!   `chained`: one dispatch of P·G workgroups; phase k's workgroups wait (invocation 0 polls,
//!     at most SPIN_MAX times, then sets the error flag) until phase k − 1's counter reaches G;
//!     every workgroup `storageBarrier()`s and increments its phase's counter when done;
//!   `chained+prefetch`: the same with the weight loads issued before the wait;
//!   `tagged+prefetch`: no counters and no fences: each output carries its phase as a tag in
//!     the same 16-byte store, and the consumers poll the values themselves until the tags are
//!     current (each invocation its own; the workgroup's tree barriers then join them).
//! Why `chained` cannot deadlock where it is meant to run: a workgroup waits only on
//! workgroups with lower ids; if the device starts workgroups in id order (NVIDIA, AMD and
//! lavapipe do; WebGPU does not promise it) every awaited workgroup has started, and the
//! lowest unfinished one waits on finished ones only. Where that fails the bounded spin sets
//! the error flag (reported) instead of hanging. Message passing needs `@coherent` output
//! (bench/grid_barrier); the litmus counts reads that saw a stale tag.
//! µs per phase = (t(P long) − t(P short)) / (P long − P short), GPU timestamps, median of 5.
//! Run: cargo run --release --example chained_phases (CHAINED_QUICK=1: two small grids and 16 MiB
//! of weights, for a CPU adapter, where the chained modes time out by design).

use fuselm::gpu::{read_buffer, GpuContext};
use fuselm::probe::timer::PassTimer;
use wgpu::util::DeviceExt;

const SRC: &str = r#"
struct P { g: u32, phase0: u32, mask: u32, spin_max: u32, prefetch: u32, chained: u32, tagged: u32, _b: u32 }
// ctr: [0] error, [1] litmus violations, [2] max spins; phase k's done-counter at 32 (k + 1)
@group(0) @binding(0) var<storage, read_write> ctr: array<atomic<u32>>;
@group(0) @binding(1) @coherent var<storage, read_write> state: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> weights: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> p: P;
var<workgroup> ok_sh: u32;
var<workgroup> red: array<f32, 256>;
const NV: u32 = NV_CONST;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let k = p.phase0 + wg.x / p.g;
    let j = wg.x % p.g;
    let base = ((k * p.g + j) * 256u + lid) * NV;
    var w: array<vec4<f32>, NV>;
    if p.prefetch != 0u {
        for (var i = 0u; i < NV; i++) { w[i] = weights[(base + i) & p.mask]; }
    }
    if p.chained != 0u && k > 0u {
        if lid == 0u {
            var ok = 1u;
            var spins = 0u;
            loop {
                if atomicLoad(&ctr[32u * k]) >= p.g { break; }
                if atomicLoad(&ctr[0]) != 0u { ok = 0u; break; }
                spins += 1u;
                if spins >= p.spin_max { atomicStore(&ctr[0], 1u); ok = 0u; break; }
            }
            atomicMax(&ctr[2], spins);
            ok_sh = ok;
        }
        let ok = workgroupUniformLoad(&ok_sh);
        storageBarrier();
        if ok == 0u { return; }
    }
    if p.prefetch == 0u {
        for (var i = 0u; i < NV; i++) { w[i] = weights[(base + i) & p.mask]; }
    }
    let at = ((k + 1u) % 2u) * 1024u + lid % p.g;
    var e = state[at];
    if p.tagged != 0u && k > 0u {
        // Poll the value itself until its tag says phase k - 1 wrote it (bounded).
        var spins = 0u;
        loop {
            if e.x == k { break; }
            spins += 1u;
            if spins >= p.spin_max { atomicStore(&ctr[0], 1u); break; }
            e = state[at];
        }
        if lid == 0u { atomicMax(&ctr[2], spins); }
    }
    let bad = k > 0u && (e.x != k || e.z != k);
    let s = bitcast<f32>(e.y);
    var acc = 0.0;
    for (var i = 0u; i < NV; i++) { acc += dot(w[i], vec4(s)); }
    red[lid] = acc;
    for (var h = 128u; h > 0u; h >>= 1u) {
        workgroupBarrier();
        if lid < h { red[lid] += red[lid + h]; }
    }
    workgroupBarrier();
    if lid == 0u {
        state[(k % 2u) * 1024u + j] = vec4(k + 1u, bitcast<u32>(red[0] * 1e-9 + s), k + 1u, 0u);
    }
    if bad { atomicAdd(&ctr[1], 1u); }
    if p.chained != 0u {
        storageBarrier();
        if lid == 0u { atomicAdd(&ctr[32u * (k + 1u)], 1u); }
    }
}
"#;

/// Polls before a wait gives up (tens of ms on a GPU; under llvmpipe's 65,535-iteration cap).
const SPIN_MAX: u32 = 60_000;
const P_SHORT: u32 = 20;
const P_LONG: u32 = 220;

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
    if !ctx.has(wgpu::Features::MEMORY_DECORATION_COHERENT) {
        println!("no MEMORY_DECORATION_COHERENT: chained phases cannot pass messages here");
        return;
    }
    use wgpu::BufferUsages as U;
    let buf = |size: u64, usage: wgpu::BufferUsages| {
        d.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage,
            mapped_at_creation: false,
        })
    };
    let big: u64 = (1u64 << 30).min(d.limits().max_storage_buffer_binding_size);
    let quick = std::env::var("CHAINED_QUICK").is_ok();
    let ctr = buf(
        4 * 32 * u64::from(P_LONG + 2),
        U::STORAGE | U::COPY_DST | U::COPY_SRC,
    );
    let state = buf(2 * 1024 * 16, U::STORAGE | U::COPY_DST);
    let weights = buf(if quick { 1 << 24 } else { big }, U::STORAGE);
    let mask = (weights.size() / 16 - 1) as u32;
    let timer = PassTimer::new(&ctx);
    let grids: &[u32] = if quick { &[4, 16] } else { &[64, 128, 256] };
    let nvs: &[u32] = if quick { &[1] } else { &[1, 4] };
    println!("| G | weights per phase | mode | µs per phase (median of 5) | min..max | timeouts | stale reads | max spins |");
    println!("|---|---|---|---|---|---|---|---|");
    for &nv in nvs {
        let source = SRC.replace("NV_CONST", &format!("{nv}u"));
        let module = ctx.shader("chained_phases", &source).await.expect("shader");
        let pipeline = ctx.pipeline("chained_phases", &module, "main");
        let layout = pipeline.get_bind_group_layout(0);
        let group = |g: u32, phase0: u32, prefetch: u32, chained: u32, tagged: u32| {
            let u = d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: bytemuck::cast_slice(&[
                    g, phase0, mask, SPIN_MAX, prefetch, chained, tagged, 0u32,
                ]),
                usage: U::UNIFORM,
            });
            d.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &layout,
                entries: &[
                    wgpu::BindGroupEntry {
                        binding: 0,
                        resource: ctr.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 1,
                        resource: state.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 2,
                        resource: weights.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 3,
                        resource: u.as_entire_binding(),
                    },
                ],
            })
        };
        for &g in grids {
            if u64::from(P_LONG) * u64::from(g) > 65_535 {
                continue;
            }
            let per_phase: Vec<wgpu::BindGroup> =
                (0..P_LONG).map(|k| group(g, k, 1, 0, 0)).collect();
            let chained = [
                group(g, 0, 0, 1, 0),
                group(g, 0, 1, 1, 0),
                group(g, 0, 1, 0, 1),
            ];
            let (ctx, ctr, state, timer) = (&ctx, &ctr, &state, &timer);
            let (pipeline, per_phase, chained) = (&pipeline, &per_phase, &chained);
            // mode 0: dispatches; 1: chained; 2: chained + prefetch; 3: tagged + prefetch
            let time = |phases: u32, mode: usize| async move {
                ctx.queue
                    .write_buffer(ctr, 0, &vec![0; ctr.size() as usize]);
                ctx.queue
                    .write_buffer(state, 0, &vec![0; state.size() as usize]);
                let t = timer
                    .time_pass(ctx, |pass| {
                        pass.set_pipeline(pipeline);
                        if mode == 0 {
                            for bg in &per_phase[..phases as usize] {
                                pass.set_bind_group(0, bg, &[]);
                                pass.dispatch_workgroups(g, 1, 1);
                            }
                        } else {
                            pass.set_bind_group(0, &chained[mode - 1], &[]);
                            pass.dispatch_workgroups(phases * g, 1, 1);
                        }
                    })
                    .await
                    .expect("timed pass");
                let bytes = read_buffer(d, &ctx.queue, ctr, 0, 16)
                    .await
                    .expect("readback");
                let s: &[u32] = bytemuck::cast_slice(&bytes);
                Run {
                    micros: t.gpu.expect("GPU timestamps") * 1e6,
                    error: s[0],
                    violations: s[1],
                    max_spins: s[2],
                }
            };
            let bytes = u64::from(g) * 256 * 16 * u64::from(nv);
            for (mode, name) in [
                (0, "dispatch"),
                (1, "chained"),
                (2, "chained+prefetch"),
                (3, "tagged+prefetch"),
            ] {
                let mut per = Vec::new();
                let (mut errors, mut violations, mut spins) = (0, 0u64, 0);
                for _ in 0..5 {
                    let short = time(P_SHORT, mode).await;
                    let long = time(P_LONG, mode).await;
                    per.push((long.micros - short.micros) / f64::from(P_LONG - P_SHORT));
                    errors += short.error + long.error;
                    violations += u64::from(short.violations) + u64::from(long.violations);
                    spins = spins.max(long.max_spins);
                }
                per.sort_by(f64::total_cmp);
                println!(
                    "| {g} | {} KiB | {name} | {:.2} | {:.2}..{:.2} | {errors} | {violations} | {spins} |",
                    bytes / 1024,
                    per[2],
                    per[0],
                    per[4]
                );
            }
        }
    }
}
