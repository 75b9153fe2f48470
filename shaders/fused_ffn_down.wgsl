// Fused decode, dispatch 4 of 4 per layer: down projection + residual, one token.
//
//   x[r] = x_mid[r] + W_down[r] . hidden
//
// ROWS = 8 rows per workgroup of 256, 32 lanes per row (as matvec.wgsl); `hidden` is read
// straight from the buffer (n_ff floats, cached). Writes the residual stream `x` that the next
// layer's fused_qkv (or the head) reads. When state.done is set the kernel returns at once.

struct Params {
    n_ff: u32,   // values per row
    n_embd: u32, // rows
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> x_mid: array<f32>;   // [n_embd]
@group(0) @binding(3) var<storage, read> hidden: array<f32>;  // [n_ff]
@group(0) @binding(4) var<storage, read> w: array<u32>;       // W_down [n_embd, n_ff]
@group(0) @binding(5) var<storage, read_write> x: array<f32>; // [n_embd]

const WG: u32 = 256u;
const LANES: u32 = 32u;
const ROWS: u32 = WG / LANES;
const PF: u32 = 6u; // weight units prefetched per invocation, r0..r5 (n_ff <= 1536 entirely)

var<workgroup> red: array<f32, WG>;
var<workgroup> flag_sh: u32;

fn h_f32(i: u32) -> f32 {
    return select(0.0, hidden[min(i, p.n_ff - 1u)], i < p.n_ff);
}

fn h_load8(u: u32) -> W8 {
    let i = 8u * u;
    if i + 8u <= p.n_ff {
        return W8(
            vec4<f32>(hidden[i], hidden[i + 1u], hidden[i + 2u], hidden[i + 3u]),
            vec4<f32>(hidden[i + 4u], hidden[i + 5u], hidden[i + 6u], hidden[i + 7u]),
        );
    }
    return W8(
        vec4<f32>(h_f32(i), h_f32(i + 1u), h_f32(i + 2u), h_f32(i + 3u)),
        vec4<f32>(h_f32(i + 4u), h_f32(i + 5u), h_f32(i + 6u), h_f32(i + 7u)),
    );
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let lane = lid % LANES;
    let row = linear_group(wg, nwg) * ROWS + lid / LANES;
    let units = (p.n_ff + 7u) / 8u;
    // Issue the weight loads first (PF units), then read the state and the activations.
    // Plain variables, not an array: an indexed array may be placed in slow local memory.
    var r0 = vec4<u32>();
    var r1 = vec4<u32>();
    var r2 = vec4<u32>();
    var r3 = vec4<u32>();
    var r4 = vec4<u32>();
    var r5 = vec4<u32>();
    if row < p.n_embd {
        r0 = w_fetch(row, min(lane + 0u * LANES, units - 1u), p.n_ff);
        r1 = w_fetch(row, min(lane + 1u * LANES, units - 1u), p.n_ff);
        r2 = w_fetch(row, min(lane + 2u * LANES, units - 1u), p.n_ff);
        r3 = w_fetch(row, min(lane + 3u * LANES, units - 1u), p.n_ff);
        r4 = w_fetch(row, min(lane + 4u * LANES, units - 1u), p.n_ff);
        r5 = w_fetch(row, min(lane + 5u * LANES, units - 1u), p.n_ff);
    }
    if lid == 0u {
        flag_sh = state.done;
    }
    if workgroupUniformLoad(&flag_sh) != 0u {
        return;
    }
    var acc = 0.0;
    if row < p.n_embd {
        if lane + 0u * LANES < units {
            let u = lane + 0u * LANES;
            acc += dot8(w_decode(r0, row, u, p.n_ff), h_load8(u));
        }
        if lane + 1u * LANES < units {
            let u = lane + 1u * LANES;
            acc += dot8(w_decode(r1, row, u, p.n_ff), h_load8(u));
        }
        if lane + 2u * LANES < units {
            let u = lane + 2u * LANES;
            acc += dot8(w_decode(r2, row, u, p.n_ff), h_load8(u));
        }
        if lane + 3u * LANES < units {
            let u = lane + 3u * LANES;
            acc += dot8(w_decode(r3, row, u, p.n_ff), h_load8(u));
        }
        if lane + 4u * LANES < units {
            let u = lane + 4u * LANES;
            acc += dot8(w_decode(r4, row, u, p.n_ff), h_load8(u));
        }
        if lane + 5u * LANES < units {
            let u = lane + 5u * LANES;
            acc += dot8(w_decode(r5, row, u, p.n_ff), h_load8(u));
        }
        for (var u = lane + PF * LANES; u < units; u += LANES) {
            acc += dot8(w_load8(row, u, p.n_ff), h_load8(u));
        }
    }
    red[lid] = acc;
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lane < s {
            red[lid] += red[lid + s];
        }
    }
    if lane == 0u && row < p.n_embd {
        x[row] = x_mid[row] + red[lid];
    }
}
