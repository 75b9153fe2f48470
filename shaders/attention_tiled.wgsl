// Prefill attention, tiled (flash-style): the same product as attention.wgsl,
//   out[t][h] = sum_{j visible to t} softmax_j(q[t][h] . K[g][j] * scale) V[g][j],
// with the keys of a query block shared through workgroup memory.
//
// One workgroup of WG = 128 per (query head h, block of BQ tokens). The block's queries
// (pre-scaled) sit in workgroup memory; the keys its tokens see are visited in tiles of BK
// positions: the tile's keys are loaded once for the BQ queries (attention.wgsl loads every
// key once per query), the BQ x BK scores computed from workgroup memory, each query row's
// running max and sum updated (online softmax, one invocation per row), then the tile's values
// are loaded over the keys and every invocation updates its HD * BQ / WG output values.
// K and V rows are stored HD + 1 floats apart, so the invocations of a warp that read
// consecutive keys' same dimension hit distinct banks.
//
// BQ, BK and HD (the head dim) come from the prelude the host composes (kernels::attention:
// BQ * HD + BK * (HD + 1) + BQ * BK + 2 * BQ floats within 16 KiB of workgroup memory).
// Causality and the sliding window are per query row (keys j <= pos + t, j > pos + t - window);
// tokens past state.n_tokens are masked and not written.

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

const WG: u32 = 128u;
const KS: u32 = HD + 1u; // row stride of kv_sh
const NEG_MAX: f32 = -3.40282e38; // finite: exp(NEG_MAX - m) is 0, never NaN
const OUTS: u32 = (BQ * HD + WG - 1u) / WG; // output values per invocation

var<workgroup> q_sh: array<f32, BQ * HD>;
var<workgroup> kv_sh: array<f32, BK * KS>;
var<workgroup> s_sh: array<f32, BQ * BK>;
var<workgroup> corr_sh: array<f32, BQ>;
var<workgroup> l_sh: array<f32, BQ>;
var<workgroup> span_sh: vec2<u32>;

// Keys visible to query token t: [first, len).
fn span(t: u32) -> vec2<u32> {
    let len = min(state.pos + t + 1u, p.n_ctx);
    var first = 0u;
    if p.window != 0u && len > p.window {
        first = len - p.window;
    }
    return vec2<u32>(first, len);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t0 = wg.y * BQ;
    let n_tokens = state.n_tokens;
    let rows = min(BQ, n_tokens - min(t0, n_tokens)); // valid query rows of the block
    if lid == 0u {
        // The keys any row of the block sees: from the first row's first to the last's end.
        if rows == 0u {
            span_sh = vec2<u32>(0u, 0u);
        } else {
            span_sh = vec2<u32>(span(t0).x, span(t0 + rows - 1u).y);
        }
    }
    let keys = workgroupUniformLoad(&span_sh);
    if keys.y <= keys.x {
        return;
    }
    let kv_base = (h / (p.n_head / p.n_head_kv)) * p.n_ctx * HD;
    for (var e = lid; e < BQ * HD; e += WG) {
        let r = e / HD;
        var v = 0.0;
        if r < rows {
            v = q[((t0 + r) * p.n_head + h) * HD + e % HD] * p.scale;
        }
        q_sh[e] = v;
    }
    // Row statistics live with invocation r < BQ (its row's max) and in l_sh / corr_sh.
    var m = NEG_MAX;
    var row_span = vec2<u32>(0u, 0u);
    if lid < rows {
        row_span = span(t0 + lid);
        l_sh[lid] = 0.0;
    }
    var acc = array<f32, OUTS>();

    for (var c0 = keys.x; c0 < keys.y; c0 += BK) {
        let n = min(BK, keys.y - c0);
        // Keys of the tile.
        for (var e = lid; e < BK * HD; e += WG) {
            let j = e / HD;
            var v = 0.0;
            if j < n {
                v = f32(k_cache[kv_base + (c0 + j) * HD + e % HD]);
            }
            kv_sh[j * KS + e % HD] = v;
        }
        workgroupBarrier();
        // Scores.
        for (var e = lid; e < BQ * BK; e += WG) {
            let r = e / BK;
            let j = e % BK;
            var s = 0.0;
            for (var d = 0u; d < HD; d++) {
                s = fma(q_sh[r * HD + d], kv_sh[j * KS + d], s);
            }
            s_sh[e] = s;
        }
        workgroupBarrier();
        // Online softmax, one invocation per query row.
        if lid < rows {
            var cmax = NEG_MAX;
            for (var j = 0u; j < n; j++) {
                let c = c0 + j;
                if c >= row_span.x && c < row_span.y {
                    cmax = max(cmax, s_sh[lid * BK + j]);
                }
            }
            let m_new = max(m, cmax);
            var sum = 0.0;
            for (var j = 0u; j < BK; j++) {
                let c = c0 + j;
                var e = 0.0;
                if j < n && c >= row_span.x && c < row_span.y {
                    e = exp(s_sh[lid * BK + j] - m_new);
                }
                s_sh[lid * BK + j] = e;
                sum += e;
            }
            let corr = exp(m - m_new);
            corr_sh[lid] = corr;
            l_sh[lid] = l_sh[lid] * corr + sum;
            m = m_new;
        } else if lid < BQ {
            for (var j = 0u; j < BK; j++) {
                s_sh[lid * BK + j] = 0.0;
            }
            corr_sh[lid] = 1.0;
        }
        // Values of the tile, over the keys.
        workgroupBarrier();
        for (var e = lid; e < BK * HD; e += WG) {
            let j = e / HD;
            var v = 0.0;
            if j < n {
                v = f32(v_cache[kv_base + (c0 + j) * HD + e % HD]);
            }
            kv_sh[j * KS + e % HD] = v;
        }
        workgroupBarrier();
        for (var i = 0u; i < OUTS; i++) {
            let e = lid + i * WG;
            if e < BQ * HD {
                let r = e / HD;
                let d = e % HD;
                var a = acc[i] * corr_sh[r];
                for (var j = 0u; j < n; j++) {
                    a = fma(s_sh[r * BK + j], kv_sh[j * KS + d], a);
                }
                acc[i] = a;
            }
        }
        workgroupBarrier(); // kv_sh and s_sh are overwritten by the next tile
    }
    for (var i = 0u; i < OUTS; i++) {
        let e = lid + i * WG;
        if e < BQ * HD {
            let r = e / HD;
            if r < rows {
                out[((t0 + r) * p.n_head + h) * HD + e % HD] = acc[i] / l_sh[r];
            }
        }
    }
}
