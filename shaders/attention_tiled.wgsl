// Prefill attention, tiled (flash-style): the same product as attention.wgsl,
//   out[t][h] = sum_{j visible to t} softmax_j(q[t][h] . K[g][j] * scale) V[g][j],
// with each tile of keys and values loaded once for a block of query tokens.
//
// One workgroup of WG (128 or 256) per (query head h, block of BQ tokens). The block's queries (pre-
// scaled, as vec4s) sit in workgroup memory; the keys its tokens see are visited BK at a time:
//   1. the tile's keys (already in registers: loaded during the previous tile's products) go to
//      workgroup memory; barrier;
//   2. scores: each invocation computes a 2 x 2 block (two query rows x two keys) as four
//      independent dot products over vec4s (where a head is wide, DS invocations split the
//      dims and their partial scores are added); barrier;
//   3. the tile's values go to workgroup memory (over the keys); online softmax: WG / BQ
//      invocations per query row each take the max of a few scores, combine the row's maxima
//      through workgroup memory, turn their scores into probabilities and keep a partial row
//      sum (combined once at the end); the next tile's keys and values are loaded; barrier;
//   4. each invocation updates two query rows x one vec4 of dims of the output, over the BK
//      keys; barrier.
// Every loop has a constant trip count, so the loads of a step are issued together. K and V
// rows are stored HD4 + 1 vec4s apart: invocations that read consecutive keys' same vec4 hit
// distinct banks.
//
// HD (head dim), BQ, BK, WG and PART (partial scores' floats: 1 unless DS > 1) come from the
// prelude the host composes (kernels::attention::Tile, sized to the adapter's workgroup memory,
// 48 KiB at most). Causality and the sliding window are per query row
// (keys j <= pos + t, j > pos + t - window); tokens past state.n_tokens are masked and not
// written.

struct Params {
    n_head: u32,
    n_head_kv: u32,
    head_dim: u32,
    n_ctx: u32,  // cache capacity in positions
    scale: f32,  // 1 / sqrt(head_dim), or the model's own
    window: u32, // 0: every earlier key; else keys within the last `window` positions
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> q: array<f32>;         // [n_tokens, n_head, head_dim]
@group(0) @binding(3) var<storage, read> k_cache: array<kv_t>;   // [n_head_kv, n_ctx, head_dim]
@group(0) @binding(4) var<storage, read> v_cache: array<kv_t>;   // [n_head_kv, n_ctx, head_dim]
@group(0) @binding(5) var<storage, read_write> out: array<f32>; // [n_tokens, n_head, head_dim]

const NEG_MAX: f32 = -3.40282e38; // finite: exp(NEG_MAX - m) is 0, never NaN
const HD4: u32 = (HD + 3u) / 4u;  // vec4s per head row (zero-padded)
const KS4: u32 = HD4 + 1u;        // row stride of kv_sh in vec4s
const JK: u32 = BK / 2u;          // key pairs of a tile
const JOBS: u32 = (BQ / 2u) * JK; // 2 x 2 score blocks
const DS: u32 = WG / JOBS;        // invocations per score block (along the dims)
const D4S: u32 = (HD4 + DS - 1u) / DS;
const TPR: u32 = WG / BQ;         // softmax invocations per query row
const SPT: u32 = (BK + TPR - 1u) / TPR;
const LD: u32 = (BK * HD4 + WG - 1u) / WG;        // K (and V) vec4s each invocation loads
const PVJ: u32 = (BQ / 2u) * HD4;                 // output jobs: two rows x one vec4
const PVI: u32 = (PVJ + WG - 1u) / WG;

var<workgroup> q_sh: array<vec4<f32>, BQ * HD4>;
var<workgroup> kv_sh: array<vec4<f32>, BK * KS4>;
var<workgroup> s_sh: array<f32, BQ * BK>;
var<workgroup> part_sh: array<f32, PART>; // DS > 1: [DS][JOBS][4] partial scores
var<workgroup> red: array<f32, WG>;
var<workgroup> corr_sh: array<f32, BQ>;
var<workgroup> first_sh: u32; // the first key any row of the block sees
var<workgroup> end_sh: u32;   // one past the last

// Keys visible to query token t: [first, len).
fn span(t: u32) -> vec2<u32> {
    let len = min(state.pos + t + 1u, p.n_ctx);
    var first = 0u;
    if p.window != 0u && len > p.window {
        first = len - p.window;
    }
    return vec2<u32>(first, len);
}

// Element e (key e / HD4, dims 4 (e % HD4) ..) of the K (k4) or V (v4) tile at c0; zero past
// `end` and past the head. Two copies because WGSL cannot pass a storage buffer to a function.
fn k4(base: u32, c0: u32, e: u32, end: u32) -> vec4<f32> {
    var v = vec4<f32>();
    let j = e / HD4;
    let d = 4u * (e % HD4);
    if e < BK * HD4 && c0 + j < end {
        let b = base + (c0 + j) * HD + d;
        for (var c = 0u; c < 4u; c++) {
            if d + c < HD {
                v[c] = f32(k_cache[b + c]);
            }
        }
    }
    return v;
}

fn v4(base: u32, c0: u32, e: u32, end: u32) -> vec4<f32> {
    var v = vec4<f32>();
    let j = e / HD4;
    let d = 4u * (e % HD4);
    if e < BK * HD4 && c0 + j < end {
        let b = base + (c0 + j) * HD + d;
        for (var c = 0u; c < 4u; c++) {
            if d + c < HD {
                v[c] = f32(v_cache[b + c]);
            }
        }
    }
    return v;
}

fn visible(s: vec2<u32>, c: u32) -> bool {
    return c >= s.x && c < s.y;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t0 = wg.y * BQ;
    let n_tokens = state.n_tokens;
    let rows = min(BQ, n_tokens - min(t0, n_tokens)); // valid query rows of the block
    if lid == 0u {
        // The keys any row of the block sees: from the first row's first to the last row's end
        // (computed inline: the loop proof reads the bound through these scalar loads).
        first_sh = 0u;
        end_sh = 0u;
        if rows > 0u {
            end_sh = min(state.pos + t0 + rows, p.n_ctx);
            let len0 = min(state.pos + t0 + 1u, p.n_ctx);
            if p.window != 0u && len0 > p.window {
                first_sh = len0 - p.window;
            }
        }
    }
    let k_first = workgroupUniformLoad(&first_sh);
    let k_end = workgroupUniformLoad(&end_sh);
    if k_end <= k_first {
        return;
    }
    let base = (h / (p.n_head / p.n_head_kv)) * p.n_ctx * HD;
    for (var i = 0u; i < (BQ * HD4 + WG - 1u) / WG; i++) {
        let e = lid + i * WG;
        if e < BQ * HD4 {
            let r = e / HD4;
            let d = 4u * (e % HD4);
            var v = vec4<f32>();
            if r < rows {
                let b = ((t0 + r) * p.n_head + h) * HD + d;
                for (var c = 0u; c < 4u; c++) {
                    if d + c < HD {
                        v[c] = q[b + c] * p.scale;
                    }
                }
            }
            q_sh[e] = v;
        }
    }

    // Score role: rows r0, r0 + 1 x keys ja, jb; dims slice `slice`.
    let job = lid % JOBS;
    let slice = lid / JOBS;
    let r0 = 2u * (job / JK);
    let ja = job % JK;
    let jb = ja + JK;
    // Softmax role: row sr, scores sub, sub + TPR, ...
    let sr = lid / TPR;
    let sub = lid % TPR;
    var sspan = vec2<u32>(0u, 0u);
    if sr < rows {
        sspan = span(t0 + sr);
    }
    var m = NEG_MAX; // row sr's running max
    var l = 0.0;     // this invocation's part of row sr's running sum

    var kreg = array<vec4<f32>, LD>();
    var vreg = array<vec4<f32>, LD>();
    for (var i = 0u; i < LD; i++) {
        kreg[i] = k4(base, k_first, lid + i * WG, k_end);
        vreg[i] = v4(base, k_first, lid + i * WG, k_end);
    }
    var acc = array<vec4<f32>, 2u * PVI>();

    for (var c0 = k_first; c0 < k_end; c0 += BK) {
        // 1. Keys.
        for (var i = 0u; i < LD; i++) {
            let e = lid + i * WG;
            if e < BK * HD4 {
                kv_sh[(e / HD4) * KS4 + e % HD4] = kreg[i];
            }
        }
        workgroupBarrier();
        // 2. Scores.
        var s00 = 0.0;
        var s01 = 0.0;
        var s10 = 0.0;
        var s11 = 0.0;
        for (var i = 0u; i < D4S; i++) {
            let d4 = slice * D4S + i;
            if d4 < HD4 {
                let qa = q_sh[r0 * HD4 + d4];
                let qb = q_sh[(r0 + 1u) * HD4 + d4];
                let ka = kv_sh[ja * KS4 + d4];
                let kb = kv_sh[jb * KS4 + d4];
                s00 += dot(qa, ka);
                s01 += dot(qa, kb);
                s10 += dot(qb, ka);
                s11 += dot(qb, kb);
            }
        }
        if DS == 1u {
            s_sh[r0 * BK + ja] = s00;
            s_sh[r0 * BK + jb] = s01;
            s_sh[(r0 + 1u) * BK + ja] = s10;
            s_sh[(r0 + 1u) * BK + jb] = s11;
        } else {
            let pb = slice * JOBS * 4u + 4u * job;
            part_sh[pb] = s00;
            part_sh[pb + 1u] = s01;
            part_sh[pb + 2u] = s10;
            part_sh[pb + 3u] = s11;
            workgroupBarrier();
            if lid < JOBS {
                var t = vec4<f32>();
                for (var s = 0u; s < DS; s++) {
                    let b = s * JOBS * 4u + 4u * lid;
                    t += vec4<f32>(part_sh[b], part_sh[b + 1u], part_sh[b + 2u], part_sh[b + 3u]);
                }
                s_sh[r0 * BK + ja] = t.x;
                s_sh[r0 * BK + jb] = t.y;
                s_sh[(r0 + 1u) * BK + ja] = t.z;
                s_sh[(r0 + 1u) * BK + jb] = t.w;
            }
        }
        workgroupBarrier();
        // 3. Values (kv_sh is free now), the softmax, the next tile's loads.
        for (var i = 0u; i < LD; i++) {
            let e = lid + i * WG;
            if e < BK * HD4 {
                kv_sh[(e / HD4) * KS4 + e % HD4] = vreg[i];
            }
        }
        var mx = NEG_MAX;
        for (var i = 0u; i < SPT; i++) {
            let j = sub + i * TPR;
            if j < BK && visible(sspan, c0 + j) {
                mx = max(mx, s_sh[sr * BK + j]);
            }
        }
        red[lid] = mx;
        workgroupBarrier();
        var m_new = m;
        for (var k = 0u; k < TPR; k++) {
            m_new = max(m_new, red[sr * TPR + k]);
        }
        let corr = exp(m - m_new);
        var sum = 0.0;
        for (var i = 0u; i < SPT; i++) {
            let j = sub + i * TPR;
            if j < BK {
                var e = 0.0;
                if visible(sspan, c0 + j) {
                    e = exp(s_sh[sr * BK + j] - m_new);
                }
                s_sh[sr * BK + j] = e;
                sum += e;
            }
        }
        l = l * corr + sum;
        m = m_new;
        if sub == 0u {
            corr_sh[sr] = corr;
        }
        let cn = c0 + BK;
        if cn < k_end {
            for (var i = 0u; i < LD; i++) {
                kreg[i] = k4(base, cn, lid + i * WG, k_end);
                vreg[i] = v4(base, cn, lid + i * WG, k_end);
            }
        }
        workgroupBarrier();
        // 4. Outputs.
        for (var it = 0u; it < PVI; it++) {
            let o = lid + it * WG;
            if o < PVJ {
                let rp = 2u * (o / HD4);
                let d4 = o % HD4;
                var a0 = acc[2u * it] * corr_sh[rp];
                var a1 = acc[2u * it + 1u] * corr_sh[rp + 1u];
                for (var j = 0u; j < BK; j++) {
                    let v = kv_sh[j * KS4 + d4];
                    a0 = fma(vec4<f32>(s_sh[rp * BK + j]), v, a0);
                    a1 = fma(vec4<f32>(s_sh[(rp + 1u) * BK + j]), v, a1);
                }
                acc[2u * it] = a0;
                acc[2u * it + 1u] = a1;
            }
        }
        workgroupBarrier(); // kv_sh, s_sh and red are overwritten by the next tile
    }
    // Row sums: the softmax invocations' parts.
    red[lid] = l;
    workgroupBarrier();
    for (var it = 0u; it < PVI; it++) {
        let o = lid + it * WG;
        if o < PVJ {
            let rp = 2u * (o / HD4);
            let d = 4u * (o % HD4);
            for (var k = 0u; k < 2u; k++) {
                let r = rp + k;
                if r < rows {
                    var lr = 0.0;
                    for (var s = 0u; s < TPR; s++) {
                        lr += red[r * TPR + s];
                    }
                    let b = ((t0 + r) * p.n_head + h) * HD + d;
                    for (var c = 0u; c < 4u; c++) {
                        if d + c < HD {
                            out[b + c] = acc[2u * it + k][c] / lr;
                        }
                    }
                }
            }
        }
    }
}
