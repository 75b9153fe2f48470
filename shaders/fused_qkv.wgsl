// Fused decode, dispatch 1 of 4 per layer: RMS norm + Q/K/V projections + RoPE, one token.
//
//   qkv[r] = rope((W[r] . (x * norm_w)) * s),   s = 1 / sqrt(mean(x^2) + eps)
//
// The norm's scale s is a scalar, so it is applied after the dot product: every lane reads
// the few x and norm_w values its weight units need (vec4 loads, from cache) and accumulates
// both its share of W[r] . (x * norm_w) and of sum(x^2); the row's 32 lanes cover x exactly
// once, so one row reduction gives the dot product and the norm together. No workgroup
// memory holds x, and the only memory round trips are the weight loads (issued first) and
// the state flag, which overlap.
//
// One workgroup of 256 computes QPASS passes of PASS_ROWS = ROWS * RPL output rows: ROWS =
// 256 / LANES row slots of LANES lanes, each lane taking RPL rows of the pass (LANES, QPASS and
// RPL are prepended: `kernels::fused_layer::lanes_for` (at most 128 so pairs share a
// workgroup), `qkv_passes` and `qkv_rows_per_lane`), so the (n_q + 2 n_kv) rows spread over
// (n_q + 2 n_kv) / (PASS_ROWS * QPASS) workgroups; on wide models several passes spread the
// loads of x and norm_w, which every workgroup makes, over more weight rows, and several rows
// per lane let each lane's x serve them all, with every row's weight loads issued at once and
// one reduction for them (fused_ffn_down's layout). RoPE rotates pairs of rows,
// so rows are assigned through a permutation that puts both members of a pair in adjacent
// slots of one workgroup (slots 2i, 2i + 1 of a head hold dims (2i, 2i + 1) in llama's
// pairing and (i, i + n_rot/2) in NeoX's); dims past n_rot are not rotated. K and V are
// stored into the KV cache by the attention dispatch that follows (it reads the cache), which
// keeps this kernel within 8 storage bindings.
//
// Architecture switches (constants, prepended with the shape; `kernels::fused_layer::FusedArch`):
// QKV_BIAS (qwen2) adds the row's bias before RoPE. QK_NORM (qwen3, gemma3) writes Q and K
// unrotated: their per-head norm needs the whole head, so fused_attention normalises and
// rotates them. POST_NORMS (gemma3): the previous layer's FFN output reaches this layer
// unnormalised (fused_ffn_down cannot see the whole vector to norm it), as the residual's second
// half `delta`: x = base + delta * pf_w / sqrt(mean(delta^2) + eps). Each row's lanes cover x
// exactly once, so one more row reduction gives that scale before the usual one.
// Vectors (norm weights, biases) come from one arena buffer at offsets in `p` (floats).
//
// Shape constants (N_EMBD, N_HEAD, ...) are prepended by `kernels::fused_layer`, so loops over
// a row have constant bounds and unroll. When state.done is set the kernel returns at once.

struct Params {
    theta_scale: f32, // freq_base^(-2 / n_rot)
    eps: f32,
    norm_off: u32,    // attention norm weights in `vecs`
    bias_off: u32,    // Q, K, V biases (consecutive) in `vecs` (QKV_BIAS)
    pf_off: u32,      // the previous layer's post-FFN norm in `vecs`; NONE: x has no delta
    rope_off: u32,    // RoPE frequency factors in `vecs` (Llama 3, LongRoPE); NONE: none
    freq_scale: f32,  // RoPE angle scale (1 / linear scaling factor)
    mscale: f32,      // multiplies RoPE's cos and sin (LongRoPE's attention factor)
}

@group(0) @binding(0) var<uniform> lp: array<Params, N_LAYER>; // one per layer
var<private> p: Params; // this layer's
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;      // [n_embd / 4] residual (+ delta)
@group(0) @binding(3) var<storage, read> vecs: array<vec4<f32>>;   // the vector arena
@group(0) @binding(4) var<storage, read> wq: array<u32>;           // [n_q, n_embd]
@group(0) @binding(5) var<storage, read> wk: array<u32>;           // [n_kv, n_embd]
@group(0) @binding(6) var<storage, read> wv: array<u32>;           // [n_kv, n_embd]
@group(0) @binding(7) var<storage, read_write> qkv: array<f32>;    // [n_q + 2 n_kv (+ n_rot: QK_NORM)]

const WG: u32 = 256u;
const ROWS: u32 = WG / LANES; // row slots per workgroup (LANES: kernels::fused_layer::lanes_for)
const PASS_ROWS: u32 = ROWS * RPL; // rows of one pass (RPL: kernels::fused_layer::qkv_rows_per_lane)
const UNITS: u32 = N_EMBD / 8u;
const PER_LANE: u32 = (UNITS + LANES - 1u) / LANES;
const N_Q: u32 = N_HEAD * HEAD_DIM;
const N_KV: u32 = N_HEAD_KV * HEAD_DIM;
const V4: u32 = N_EMBD / 4u;

var<workgroup> out_sh: array<f32, PASS_ROWS>;
var<workgroup> flag_sh: u32;

// The pass's weight loop for its region (Q, K or V; uniform in a pass): fetch_wq/wk/wv and
// dots_wq/wk/wv are fused_qkv_region.wgsl instantiated for each weight binding. The branch stays
// outside the loops: with the region chosen per weight unit inside them, Tint's build (Dawn,
// Chromium) of this kernel ran 2.2× slower than Naga's at Phi-3-mini's width (Q4_K Q/K, Q6_K V).
fn fetch_pass(slot0: u32, r: u32, lane: u32) -> array<vec4<u32>, PER_LANE * RPL> {
    let region = slot_row(slot0, 0u).region;
    if region == 0u {
        return fetch_wq(slot0, r, lane);
    } else if region == 1u {
        return fetch_wk(slot0, r, lane);
    }
    return fetch_wv(slot0, r, lane);
}

fn dots_pass(slot0: u32, r: u32, lane: u32, raw: array<vec4<u32>, PER_LANE * RPL>, xw: array<W8, PER_LANE>, xs: array<f32, PER_LANE>) -> vec4<f32> {
    let region = slot_row(slot0, 0u).region;
    if region == 0u {
        return dots_wq(slot0, r, lane, raw, xw, xs);
    } else if region == 1u {
        return dots_wk(slot0, r, lane, raw, xw, xs);
    }
    return dots_wv(slot0, r, lane, raw, xw, xs);
}

// Where slot `slot0 + r` of a pass starting at `slot0` reads its weight row: the region (0: Q,
// 1: K, 2: V; a pass's PASS_ROWS slots lie in one region, so the region is uniform: regions
// are multiples of PASS_ROWS rows, as PASS_ROWS <= 8 and head_dim % 8 == 0), the region's first
// row in qkv, the row, and the slot's place `s` in its head. RoPE pairs sit in adjacent slots
// (pass slot k = i * ROWS + r is lane row i of slot r; ROWS is even). Slots past the end read
// the last row.
struct SlotRow {
    region: u32,
    base: u32,
    row: u32,
    s: u32,
}

fn slot_row(slot0: u32, r: u32) -> SlotRow {
    let slot = min(slot0 + r, N_Q + 2u * N_KV - 1u);
    var region = 0u;
    var base = 0u;
    if slot0 >= N_Q + N_KV {
        region = 2u;
        base = N_Q + N_KV;
    } else if slot0 >= N_Q {
        region = 1u;
        base = N_Q;
    }
    let in_region = slot - base;
    let s = in_region % HEAD_DIM;
    let head = in_region / HEAD_DIM;
    var d = s;
    if region < 2u && s < N_ROT && NEOX {
        d = s / 2u + (s % 2u) * (N_ROT / 2u);
    }
    return SlotRow(region, base, head * HEAD_DIM + d, s);
}

// RoPE's (sin, cos) of rotation pair `pair` at position `pos` with layer params `lq`.
fn pair_sincos(lq: Params, pos: u32, pair: u32) -> vec2<f32> {
    var factor = 1.0;
    if lq.rope_off != NONE {
        let fi = lq.rope_off + pair;
        factor = vecs[fi / 4u][fi % 4u];
    }
    return rope_sincos(rope_theta(pos, pair, lq.theta_scale), factor, lq.freq_scale, lq.mscale);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    if wg.x >= X_BASE {
        return; // extra columns carry the layer (kernels::fused_layer::LayerIndexing)
    }
    // main's own p: a uniform load (the private copy is non-uniform to Tint's analysis).
    let p = lp[enter_layer(nwg.x)];
    // QPASS passes of ROWS slots each (`kernels::fused_layer::qkv_passes`): x, norm_w and the
    // norm's scale are loaded and computed once per workgroup, and each pass loads the next
    // pass's weights before its own arithmetic.
    let lane = lid % LANES;
    let r = lid / LANES;
    var slot0 = wg.x * QPASS * PASS_ROWS;

    // Every load of this invocation first (weights, x, norm_w), then the state flag: their
    // latencies overlap. Fixed-size arrays indexed by unrolled loops stay in registers.
    var raw = fetch_pass(slot0, r, lane);
    var xa: array<W8, PER_LANE>;
    var na: array<W8, PER_LANE>;
    let n4 = p.norm_off / 4u;
    let delta = POST_NORMS && p.pf_off != NONE; // uniform
    var da: array<W8, PER_LANE>; // delta and its norm weights (POST_NORMS)
    var fa: array<W8, PER_LANE>;
    for (var j = 0u; j < PER_LANE; j++) {
        let u = min(lane + j * LANES, UNITS - 1u);
        xa[j] = W8(x[2u * u], x[2u * u + 1u]);
        na[j] = W8(vecs[n4 + 2u * u], vecs[n4 + 2u * u + 1u]);
        if delta {
            let f4 = p.pf_off / 4u;
            da[j] = W8(x[V4 + 2u * u], x[V4 + 2u * u + 1u]);
            fa[j] = W8(vecs[f4 + 2u * u], vecs[f4 + 2u * u + 1u]);
        }
    }
    if lid == 0u {
        flag_sh = state.done;
    }
    if workgroupUniformLoad(&flag_sh) != 0u {
        return;
    }
    // QK_NORM: fused_attention rotates the normalised query and key; RoPE's (sin, cos) of each
    // pair at this position (a chain of up to n_rot / 2 multiplies and a sin/cos) is computed
    // once here, by the first workgroup, into qkv's tail, instead of in every attention
    // workgroup.
    if QK_NORM && wg.x == 0u && lid < N_ROT / 2u {
        let sc = pair_sincos(p, state.pos, lid);
        qkv[N_Q + 2u * N_KV + 2u * lid] = sc.x;
        qkv[N_Q + 2u * N_KV + 2u * lid + 1u] = sc.y;
    }

    if delta {
        // x = base + delta * pf_w * s_delta: first s_delta, from the same lanes.
        var dd = 0.0;
        for (var j = 0u; j < PER_LANE; j++) {
            if lane + j * LANES < UNITS {
                dd += dot8(da[j], da[j]);
            }
        }
        let sd = inverseSqrt(row_sum(lid, dd) / f32(N_EMBD) + p.eps);
        for (var j = 0u; j < PER_LANE; j++) {
            xa[j] = W8(xa[j].a + da[j].a * sd * fa[j].a, xa[j].b + da[j].b * sd * fa[j].b);
        }
    }
    // x * norm_w and this lane's share of sum(x^2), once for every pass.
    var xw: array<W8, PER_LANE>;
    var xs: array<f32, PER_LANE>;
    var xx = 0.0;
    for (var j = 0u; j < PER_LANE; j++) {
        let xv = xa[j];
        xw[j] = W8(xv.a * na[j].a, xv.b * na[j].b);
        xs[j] = sum8(xw[j]);
        if lane + j * LANES < UNITS {
            xx += dot8(xv, xv);
        }
    }
    var scale = 0.0;
    if RPL == 4u {
        // No free component for sum(x^2) beside the rows' dot products: its own reduction.
        scale = inverseSqrt(row_sum(lid, xx) / f32(N_EMBD) + p.eps);
    }
    for (var qp = 0u; qp < QPASS; qp++) {
        let cur0 = slot0;
        var nxt: array<vec4<u32>, PER_LANE * RPL>;
        if qp + 1u < QPASS {
            slot0 += PASS_ROWS;
            nxt = fetch_pass(slot0, r, lane);
        }
        // W . (x * norm_w) of each of the lane's rows over its units.
        var acc = dots_pass(cur0, r, lane, raw, xw, xs);
        // The first pass reduces sum(x^2) with its dot products (one reduction, as with one
        // pass) where a component is free; later ones reuse the scale.
        var t: vec4<f32>;
        if qp == 0u && RPL < 4u {
            acc[min(RPL, 3u)] = xx;
            t = row_sum4(lid, acc);
            scale = inverseSqrt(t[min(RPL, 3u)] / f32(N_EMBD) + p.eps);
        } else {
            t = row_sum4(lid, acc);
        }
        for (var i = 0u; i < RPL; i++) {
            let k = i * ROWS + r;
            let cur = slot_row(cur0, k);
            var v = t[i] * scale;
            if QKV_BIAS {
                let b = p.bias_off + cur.base + cur.row;
                v += vecs[b / 4u][b % 4u];
            }
            if lane == 0u {
                out_sh[k] = v;
            }
        }
        workgroupBarrier();
        for (var i = 0u; i < RPL; i++) {
            let k = i * ROWS + r;
            let cur = slot_row(cur0, k);
            let v = out_sh[k];
            if lane == 0u && cur0 + k < N_Q + 2u * N_KV {
                if cur.region == 2u || cur.s >= N_ROT || QK_NORM {
                    qkv[cur.base + cur.row] = v;
                } else {
                    // Rotate the pair (slots s and s ^ 1, pass slots k and k ^ 1 as ROWS is
                    // even): x0 is the even slot's value, x1 the odd one's.
                    let sc = pair_sincos(p, state.pos, cur.s / 2u);
                    let even = (cur.s % 2u) == 0u;
                    let other = out_sh[k ^ 1u];
                    let x0 = select(other, v, even);
                    let x1 = select(v, other, even);
                    qkv[cur.base + cur.row] = select(x0 * sc.x + x1 * sc.y, x0 * sc.y - x1 * sc.x, even);
                }
            }
        }
        if qp + 1u < QPASS {
            workgroupBarrier(); // out_sh is the next pass's
            raw = nxt;
        }
    }
}
