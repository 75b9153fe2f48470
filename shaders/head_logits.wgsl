// Output head for one token: final RMS norm + logits matrix-vector product + sampling
// penalties, and each workgroup's best (penalised) logit for greedy decoding.
//
//   logits[r] = penalize((W[r] . (x * norm_w)) * s, counts[r]),  s = 1 / sqrt(mean(x^2) + eps)
//   best[g]   = (value, id) of the largest logit among this workgroup's rows (lowest id on ties);
//               (NONFINITE_Z, NONFINITE) if any of them is NaN or infinite
//
// ROWS_PER_WG = 32 rows per workgroup of 256: SETS row-sets of 256 / LANES rows, LANES lanes
// per row (LANES is prepended); each lane walks its units of all the sets' rows at once, so
// SETS weight loads are in flight per invocation, and, as in fused_qkv.wgsl, the norm's scale
// is applied after the dot products, with sum(x^2) from the same lanes. This is the widest
// dispatch of a step (49k rows, ~1,500 workgroups): its time is throughput, so it keeps few
// registers rather than prefetching whole rows. A head split into row-chunks (larger than a
// storage binding) is one dispatch per chunk; `row0` and `best0` place it. `counts[id]` is how
// often id occurs in the penalty window (kept on the GPU by sample_choose.wgsl). N_EMBD is
// prepended. // When state.done is set the kernel returns at once.

struct Params {
    n_rows: u32, // rows in this chunk
    row0: u32,   // first id of this chunk
    best0: u32,  // first `best` slot of this chunk
    eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;           // [n_tokens, n_embd / 4]
@group(0) @binding(3) var<storage, read> norm_w: array<vec4<f32>>;      // [n_embd / 4]
@group(0) @binding(4) var<storage, read> w: array<u32>;                 // [n_rows, n_embd]
@group(0) @binding(5) var<storage, read> counts: array<u32>;            // [vocab]
@group(0) @binding(6) var<storage, read> sampler: Sampler;
@group(0) @binding(7) var<storage, read_write> logits: array<f32>;      // [vocab]
@group(0) @binding(8) var<storage, read_write> best: array<vec2<u32>>;  // [groups]: (f32 bits, id)

const WG: u32 = 256u;
const RPS: u32 = WG / LANES;              // rows per set
const ROWS_PER_WG: u32 = 32u;             // kernels::sample::HEAD_ROWS_PER_WORKGROUP
const SETS: u32 = ROWS_PER_WG / RPS;
const UNITS: u32 = N_EMBD / 8u;

var<workgroup> vals: array<f32, ROWS_PER_WG>;
var<workgroup> flag_sh: u32;
var<workgroup> bad_sh: array<u32, ROWS_PER_WG>; // 1: the row's logit is not finite

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = linear_group(wg, nwg);
    let lane = lid % LANES;
    let r = lid / LANES;
    if lid == 0u {
        flag_sh = state.done;
    }
    if workgroupUniformLoad(&flag_sh) != 0u {
        return;
    }
    let xb = (max(state.n_tokens, 1u) - 1u) * (N_EMBD / 4u); // the step's last token
    var acc: array<f32, SETS>; // one dot per row-set
    var ss = 0.0;
    for (var u = lane; u < UNITS; u += LANES) {
        let xv = W8(x[xb + 2u * u], x[xb + 2u * u + 1u]);
        let xw = W8(xv.a * norm_w[2u * u], xv.b * norm_w[2u * u + 1u]);
        let xs = sum8(xw);
        ss += dot8(xv, xv);
        for (var rs = 0u; rs < SETS; rs++) {
            let row = min(g * ROWS_PER_WG + rs * RPS + r, p.n_rows - 1u);
            acc[rs] += w_dot8(w_fetch(row, u, N_EMBD), row, u, N_EMBD, xw, xs);
        }
    }
    let scale = inverseSqrt(row_sum(lid, ss) / f32(N_EMBD) + p.eps);
    for (var rs = 0u; rs < SETS; rs++) {
        let local = rs * RPS + r;
        let row = g * ROWS_PER_WG + local;
        let d = row_sum(lid, acc[rs]);
        if lane == 0u {
            var v = 0.0;
            var bad = 0u;
            if row < p.n_rows {
                let id = p.row0 + row;
                var count = 0u;
                if sampler.penalties_on != 0u || sampler.constrained != 0u {
                    count = counts[id];
                }
                let raw = d * scale;
                v = penalize(raw, count, sampler);
                logits[id] = v;
                if non_finite(raw) || non_finite(v) {
                    v = NONFINITE_Z;
                    bad = 1u;
                }
            }
            vals[local] = v;
            bad_sh[local] = bad;
        }
    }
    workgroupBarrier();
    // The workgroup's best row, over the first 32 invocations (one per row).
    let local = lid % ROWS_PER_WG;
    let row = g * ROWS_PER_WG + local;
    var id = select(NONE, p.row0 + row, row < p.n_rows);
    if bad_sh[local] != 0u {
        id = NONFINITE;
    }
    let b = row_best(lid, vals[local], id);
    if lid == 0u {
        best[p.best0 + g] = b;
    }
}
