// Fused decode, dispatch 3 of 4 per layer: attention combine + residual + RMS norm + gate/up
// projections + SwiGLU, one token.
//
//   x_mid = x + sum_{h, c} exp(m_{h,c} - M_h) / L_h * P[h, c]      (see fused_attention.wgsl)
//   xn    = x_mid / sqrt(mean(x_mid^2) + eps) * norm_w
//   hidden[r] = silu(W_gate[r] . xn) * (W_up[r] . xn)
//
// Every workgroup rebuilds the whole x_mid from the partial projections (n_head * chunks rows
// of n_embd floats, from cache) and normalises it in workgroup memory; workgroup 0 also
// writes x_mid out for the residual of dispatch 4. Then ROWS = 8 rows of gate and of up per
// workgroup of 256, 32 lanes per row, so the FFN weights stream through n_ff / 8 workgroups.
//
// When state.done is set the kernel returns at once.

struct Params {
    n_embd: u32,
    n_ff: u32,
    n_head: u32,
    max_chunks: u32, // chunk slots per head in `part`
    eps: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> x: array<f32>;             // [n_embd]
@group(0) @binding(3) var<storage, read> part: array<f32>;          // [n_head, max_chunks, n_embd + 2]
@group(0) @binding(4) var<storage, read> norm_w: array<f32>;        // [n_embd]
@group(0) @binding(5) var<storage, read> wgate: array<u32>;         // W_gate [n_ff, n_embd]
@group(0) @binding(6) var<storage, read> wup: array<u32>;           // W_up   [n_ff, n_embd]
@group(0) @binding(7) var<storage, read_write> x_mid: array<f32>;   // [n_embd]
@group(0) @binding(8) var<storage, read_write> hidden: array<f32>;  // [n_ff]

const WG: u32 = 256u;
const LANES: u32 = 32u;
const ROWS: u32 = WG / LANES;
const CHUNK: u32 = 256u;           // must match fused_attention.wgsl
const MAX_WEIGHTS: u32 = 1024u;    // n_head * max_chunks, checked on the host
const PF: u32 = 3u;                // weight units prefetched per invocation (per matrix)

var<workgroup> wts: array<f32, MAX_WEIGHTS>;
var<workgroup> red: array<f32, WG>;
var<workgroup> red2: array<f32, WG>;
var<workgroup> chunks_sh: u32;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // Issue this invocation's gate/up weight loads first: their latency overlaps the combine
    // and the norm below.
    let n = p.n_embd;
    let units = (n + 7u) / 8u;
    let lane = lid % LANES;
    let r = lid / LANES;
    let row = linear_group(wg, nwg) * ROWS + r;
    // Plain variables, not arrays: an indexed array may be placed in slow local memory.
    let u0 = min(lane, units - 1u);
    let u1 = min(lane + LANES, units - 1u);
    let u2 = min(lane + 2u * LANES, units - 1u);
    var g0 = vec4<u32>();
    var g1 = vec4<u32>();
    var g2 = vec4<u32>();
    var q0 = vec4<u32>();
    var q1 = vec4<u32>();
    var q2 = vec4<u32>();
    if row < p.n_ff {
        g0 = wgate_fetch(row, u0, n);
        q0 = wup_fetch(row, u0, n);
        g1 = wgate_fetch(row, u1, n);
        q1 = wup_fetch(row, u1, n);
        g2 = wgate_fetch(row, u2, n);
        q2 = wup_fetch(row, u2, n);
    }
    if lid == 0u {
        chunks_sh = select(0u, (state.pos + CHUNK) / CHUNK, state.done == 0u);
    }
    let n_chunks = workgroupUniformLoad(&chunks_sh);
    if n_chunks == 0u {
        return;
    }
    let stride = n + 2u;
    // Combine weights of each head's chunks.
    for (var h = lid; h < p.n_head; h += WG) {
        let b = h * p.max_chunks;
        var mx = -3.40282e38;
        for (var c = 0u; c < n_chunks; c++) {
            mx = max(mx, part[(b + c) * stride + n]);
        }
        var total = 0.0;
        for (var c = 0u; c < n_chunks; c++) {
            let at = (b + c) * stride;
            let f = exp(part[at + n] - mx);
            wts[b + c] = f;
            total += f * part[at + n + 1u];
        }
        for (var c = 0u; c < n_chunks; c++) {
            wts[b + c] /= total;
        }
    }
    workgroupBarrier();
    var ss = 0.0;
    for (var i = lid; i < n; i += WG) {
        // Four independent partial sums, so four loads are in flight at a time.
        var acc = vec4<f32>();
        let terms = p.n_head * n_chunks;
        var hc = 0u;
        for (; hc + 4u <= terms; hc += 4u) {
            let b0 = (hc / n_chunks) * p.max_chunks + hc % n_chunks;
            let b1 = ((hc + 1u) / n_chunks) * p.max_chunks + (hc + 1u) % n_chunks;
            let b2 = ((hc + 2u) / n_chunks) * p.max_chunks + (hc + 2u) % n_chunks;
            let b3 = ((hc + 3u) / n_chunks) * p.max_chunks + (hc + 3u) % n_chunks;
            acc += vec4<f32>(wts[b0], wts[b1], wts[b2], wts[b3]) * vec4<f32>(
                part[b0 * stride + i], part[b1 * stride + i],
                part[b2 * stride + i], part[b3 * stride + i]);
        }
        for (; hc < terms; hc++) {
            let b = (hc / n_chunks) * p.max_chunks + hc % n_chunks;
            acc.x += wts[b] * part[b * stride + i];
        }
        let v = x[i] + ((acc.x + acc.y) + (acc.z + acc.w));
        xn[i] = v;
        ss += v * v;
    }
    let scale = inverseSqrt(wg_sum(lid, ss) / f32(n) + p.eps);
    let first = linear_group(wg, nwg) == 0u;
    for (var i = lid; i < units * 8u; i += WG) {
        if i < n {
            let v = xn[i];
            if first {
                x_mid[i] = v;
            }
            xn[i] = v * scale * norm_w[i];
        } else {
            xn[i] = 0.0;
        }
    }
    workgroupBarrier();

    var a_g = 0.0;
    var a_u = 0.0;
    if row < p.n_ff {
        if lane < units {
            let xv = xn_load8(lane);
            a_g += dot8(wgate_decode(g0, row, lane, n), xv);
            a_u += dot8(wup_decode(q0, row, lane, n), xv);
        }
        if lane + LANES < units {
            let xv = xn_load8(lane + LANES);
            a_g += dot8(wgate_decode(g1, row, lane + LANES, n), xv);
            a_u += dot8(wup_decode(q1, row, lane + LANES, n), xv);
        }
        if lane + 2u * LANES < units {
            let xv = xn_load8(lane + 2u * LANES);
            a_g += dot8(wgate_decode(g2, row, lane + 2u * LANES, n), xv);
            a_u += dot8(wup_decode(q2, row, lane + 2u * LANES, n), xv);
        }
        for (var u = lane + PF * LANES; u < units; u += LANES) {
            let xv = xn_load8(u);
            a_g += dot8(wgate_load8(row, u, n), xv);
            a_u += dot8(wup_load8(row, u, n), xv);
        }
    }
    red[lid] = a_g;
    red2[lid] = a_u;
    for (var st = LANES / 2u; st > 0u; st >>= 1u) {
        workgroupBarrier();
        if lane < st {
            red[lid] += red[lid + st];
            red2[lid] += red2[lid + st];
        }
    }
    if lane == 0u && row < p.n_ff {
        let g = red[lid];
        hidden[row] = g / (1.0 + exp(-g)) * red2[lid];
    }
}
