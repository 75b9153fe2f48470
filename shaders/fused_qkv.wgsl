// Fused decode, dispatch 1 of 4 per layer: RMS norm + Q/K/V projections + RoPE, one token.
//
//   xn = x / sqrt(mean(x^2) + eps) * norm_w
//   qkv = [rope(Wq xn) | rope(Wk xn) | Wv xn]
//
// One workgroup of 256 computes ROWS = 8 output rows with 32 lanes per row (as matvec.wgsl),
// which spreads the ~n_embd * (n_q + 2 n_kv) weights over (n_q + 2 n_kv) / 8 workgroups — the
// many workgroups in flight are what fill the memory bus at batch 1. Every workgroup first
// normalises the whole x (n_embd values, a few KiB from cache) into workgroup memory: cheaper
// than a dispatch boundary. RoPE rotates pairs of rows, so rows are assigned through a
// permutation that puts both members of a pair in the same workgroup (adjacent slots 2i, 2i+1
// of a head hold dims (2i, 2i+1) in llama's pairing and (i, i + n_rot/2) in NeoX's); dims past
// n_rot are not rotated. K and V are not stored into the KV cache here: the attention
// dispatch that follows stores them (it is the one that reads the cache), which saves this
// kernel two bindings. The weight decoders are the usual `weights_<format>.wgsl`, renamed per
// weight (wq_load8, wk_load8, wv_load8) by `kernels::weights::decoder_named`.
//
// When state.done is set (the sampler chose a stop token) the kernel returns at once.

struct Params {
    n_embd: u32,
    n_q: u32,         // n_head * head_dim rows
    n_kv: u32,        // n_head_kv * head_dim rows (each of K and V)
    head_dim: u32,
    n_rot: u32,       // rotated dims per head (even, <= head_dim)
    neox: u32,        // 0: pairs (2i, 2i+1); 1: pairs (i, i + n_rot/2)
    theta_scale: f32, // freq_base^(-2 / n_rot)
    eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> x: array<f32>;          // [n_embd] residual stream
@group(0) @binding(3) var<storage, read> norm_w: array<f32>;     // [n_embd]
@group(0) @binding(4) var<storage, read> wq: array<u32>;         // [n_q, n_embd]
@group(0) @binding(5) var<storage, read> wk: array<u32>;         // [n_kv, n_embd]
@group(0) @binding(6) var<storage, read> wv: array<u32>;         // [n_kv, n_embd]
@group(0) @binding(7) var<storage, read_write> qkv: array<f32>;  // [n_q + 2 n_kv]

const WG: u32 = 256u;
const LANES: u32 = 32u;
const ROWS: u32 = WG / LANES; // must match kernels::fused::ROWS_PER_WORKGROUP
const PF: u32 = 3u;           // weight units prefetched per invocation (raw0..raw2)

var<workgroup> red: array<f32, WG>;
var<workgroup> out_sh: array<f32, ROWS>;
var<workgroup> flag_sh: u32;

fn qkv_decode(region: u32, raw: vec4<u32>, row: u32, u: u32, n: u32) -> W8 {
    if region == 0u {
        return wq_decode(raw, row, u, n);
    } else if region == 1u {
        return wk_decode(raw, row, u, n);
    }
    return wv_decode(raw, row, u, n);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // This workgroup's 8 slots; regions (Q, K, V) are multiples of 8 rows (head_dim % 8 == 0).
    let n = p.n_embd;
    let units = (n + 7u) / 8u;
    let slot0 = linear_group(wg, nwg) * ROWS;
    let total = p.n_q + 2u * p.n_kv;
    let lane = lid % LANES;
    let r = lid / LANES;
    let slot = slot0 + r;
    var region = 0u; // 0: Q, 1: K, 2: V
    var base = 0u;   // first row of the region in qkv
    if slot0 >= p.n_q + p.n_kv {
        region = 2u;
        base = p.n_q + p.n_kv;
    } else if slot0 >= p.n_q {
        region = 1u;
        base = p.n_q;
    }
    // Slot -> row of the weight: RoPE pairs sit in adjacent slots.
    let in_region = slot - base;
    let s = in_region % p.head_dim;
    let head = in_region / p.head_dim;
    var d = s;
    if region < 2u && s < p.n_rot && p.neox != 0u {
        d = s / 2u + (s % 2u) * (p.n_rot / 2u);
    }
    let row = head * p.head_dim + d;

    // Issue this invocation's weight loads first (PF units), so their memory latency overlaps
    // the state read and the norm below; decode them afterwards.
    // Plain variables, not an array: an indexed array may be placed in slow local memory.
    var raw0 = vec4<u32>();
    var raw1 = vec4<u32>();
    var raw2 = vec4<u32>();
    if slot < total {
        if region == 0u {
            raw0 = wq_fetch(row, min(lane, units - 1u), n);
            raw1 = wq_fetch(row, min(lane + LANES, units - 1u), n);
            raw2 = wq_fetch(row, min(lane + 2u * LANES, units - 1u), n);
        } else if region == 1u {
            raw0 = wk_fetch(row, min(lane, units - 1u), n);
            raw1 = wk_fetch(row, min(lane + LANES, units - 1u), n);
            raw2 = wk_fetch(row, min(lane + 2u * LANES, units - 1u), n);
        } else {
            raw0 = wv_fetch(row, min(lane, units - 1u), n);
            raw1 = wv_fetch(row, min(lane + LANES, units - 1u), n);
            raw2 = wv_fetch(row, min(lane + 2u * LANES, units - 1u), n);
        }
    }

    if lid == 0u {
        flag_sh = state.done;
    }
    if workgroupUniformLoad(&flag_sh) != 0u {
        return;
    }
    var ss = 0.0;
    for (var i = lid; i < n; i += WG) {
        let v = x[i];
        ss += v * v;
    }
    let scale = inverseSqrt(wg_sum(lid, ss) / f32(n) + p.eps);
    for (var i = lid; i < units * 8u; i += WG) {
        xn[i] = select(0.0, x[min(i, n - 1u)] * scale * norm_w[min(i, n - 1u)], i < n);
    }
    workgroupBarrier();

    var acc = 0.0;
    if slot < total {
        if lane < units {
            acc += dot8(qkv_decode(region, raw0, row, lane, n), xn_load8(lane));
        }
        if lane + LANES < units {
            acc += dot8(qkv_decode(region, raw1, row, lane + LANES, n), xn_load8(lane + LANES));
        }
        if lane + 2u * LANES < units {
            let u = lane + 2u * LANES;
            acc += dot8(qkv_decode(region, raw2, row, u, n), xn_load8(u));
        }
        // Rows longer than PF * 32 units (n_embd > 1024): the rest, loaded as we go.
        for (var u = lane + PF * LANES; u < units; u += LANES) {
            if region == 0u {
                acc += dot8(wq_load8(row, u, n), xn_load8(u));
            } else if region == 1u {
                acc += dot8(wk_load8(row, u, n), xn_load8(u));
            } else {
                acc += dot8(wv_load8(row, u, n), xn_load8(u));
            }
        }
    }
    red[lid] = acc;
    for (var st = LANES / 2u; st > 0u; st >>= 1u) {
        workgroupBarrier();
        if lane < st {
            red[lid] += red[lid + st];
        }
    }
    workgroupBarrier();
    if lane == 0u {
        out_sh[r] = red[lid];
    }
    workgroupBarrier();
    if lane != 0u || slot >= total {
        return;
    }
    let v = out_sh[r];
    if region == 2u || s >= p.n_rot {
        qkv[base + row] = v;
        return;
    }
    // Rotate the pair (slots s and s ^ 1): dims d0 = dim of the even slot, d1 of the odd one.
    let pair = s / 2u;
    let sc = sincos(rope_theta(state.pos, pair, p.theta_scale));
    let even = (s % 2u) == 0u;
    let other = out_sh[r ^ 1u];
    let x0 = select(other, v, even);
    let x1 = select(v, other, even);
    qkv[base + row] = select(x0 * sc.x + x1 * sc.y, x0 * sc.y - x1 * sc.x, even);
}
