// Output head for one token: final RMS norm + logits matrix-vector product + sampling
// penalties, and each workgroup's best (penalised) logit for greedy decoding.
//
//   logits[r] = penalize((W[r] . norm(x)), counts[r])
//   best[g]   = (value, id) of the largest logit among this workgroup's rows (lowest id on ties)
//
// ROWS_PER_WG = 32 rows per workgroup of 256 (4 row-sets of 8, 32 lanes per row, all four
// accumulated at once so four weight loads are in flight per invocation). The vocabulary is
// large (49k rows), so this is the widest dispatch of a step. A head split into row-chunks
// (larger than a storage binding) is one dispatch per chunk; `row0` and `best0` place it.
// `counts[id]` is how often id occurs in the penalty window (kept on the GPU by
// sample_choose.wgsl). When state.done is rs the kernel returns at once.

struct Params {
    n_embd: u32,
    n_rows: u32, // rows in this chunk
    row0: u32,   // first id of this chunk
    best0: u32,  // first `best` slot of this chunk
    eps: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> x: array<f32>;                 // [n_tokens, n_embd]
@group(0) @binding(3) var<storage, read> norm_w: array<f32>;            // [n_embd]
@group(0) @binding(4) var<storage, read> w: array<u32>;                 // [n_rows, n_embd]
@group(0) @binding(5) var<storage, read> counts: array<u32>;            // [vocab]
@group(0) @binding(6) var<storage, read> sampler: Sampler;
@group(0) @binding(7) var<storage, read_write> logits: array<f32>;      // [vocab]
@group(0) @binding(8) var<storage, read_write> best: array<vec2<u32>>;  // [groups]: (f32 bits, id)

const WG: u32 = 256u;
const LANES: u32 = 32u;
const SETS: u32 = 4u;
const ROWS_PER_WG: u32 = SETS * (WG / LANES); // kernels::head::ROWS_PER_WORKGROUP

var<workgroup> red: array<f32, WG * SETS>;
var<workgroup> vals: array<f32, ROWS_PER_WG>;
var<workgroup> flag_sh: u32;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    if lid == 0u {
        flag_sh = state.done;
    }
    if workgroupUniformLoad(&flag_sh) != 0u {
        return;
    }
    let n = p.n_embd;
    let xb = (max(state.n_tokens, 1u) - 1u) * n; // the step's last token
    var ss = 0.0;
    for (var i = lid; i < n; i += WG) {
        let v = x[xb + i];
        ss += v * v;
    }
    let scale = inverseSqrt(wg_sum(lid, ss) / f32(n) + p.eps);
    let units = (n + 7u) / 8u;
    for (var i = lid; i < units * 8u; i += WG) {
        xn[i] = select(0.0, x[xb + min(i, n - 1u)] * scale * norm_w[min(i, n - 1u)], i < n);
    }
    workgroupBarrier();

    let g = linear_group(wg, nwg);
    let lane = lid % LANES;
    let r = lid / LANES;
    var acc = array<f32, SETS>();
    for (var u = lane; u < units; u += LANES) {
        let xv = xn_load8(u);
        for (var rs = 0u; rs < SETS; rs++) {
            let row = g * ROWS_PER_WG + rs * (WG / LANES) + r;
            if row < p.n_rows {
                acc[rs] += dot8(w_load8(row, u, n), xv);
            }
        }
    }
    for (var rs = 0u; rs < SETS; rs++) {
        red[rs * WG + lid] = acc[rs];
    }
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lane < s {
            for (var rs = 0u; rs < SETS; rs++) {
                red[rs * WG + lid] += red[rs * WG + lid + s];
            }
        }
    }
    workgroupBarrier();
    if lane == 0u {
        for (var rs = 0u; rs < SETS; rs++) {
            let local = rs * (WG / LANES) + r;
            let row = g * ROWS_PER_WG + local;
            var v = 0.0;
            if row < p.n_rows {
                let id = p.row0 + row;
                var count = 0u;
                if sampler.penalties_on != 0u {
                    count = counts[id];
                }
                v = penalize(red[rs * WG + lid], count, sampler);
                logits[id] = v;
            }
            vals[local] = v;
        }
    }
    workgroupBarrier();
    if lid == 0u {
        var bv = 0.0;
        var bi = NONE;
        for (var local = 0u; local < ROWS_PER_WG; local++) {
            let row = g * ROWS_PER_WG + local;
            let v = vals[local];
            if row < p.n_rows && v == v && (bi == NONE || v > bv) {
                bv = v;
                bi = p.row0 + row;
            }
        }
        best[p.best0 + g] = vec2<u32>(bitcast<u32>(bv), bi);
    }
}
