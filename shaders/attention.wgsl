// Causal grouped-query attention over the KV cache (f32, or f16 storage via kv_f16.wgsl):
//   out[t][h] = sum_{j <= pos+t} softmax_j(q[t][h] . K[g][j] * scale) V[g][j],
//   g = h / (n_head / n_head_kv), pos = state.pos; with a sliding window (window > 0) only
//   the keys j > pos + t - window are visible.
//
// One workgroup per (query head, token). Keys are visited in chunks of CHUNK positions whose
// scores sit in workgroup memory; a running max / sum rescales the accumulator between chunks
// (online softmax), so no score buffer sized by n_ctx is needed and any context length works
// with 2.3 KiB of workgroup memory. Each invocation owns output dims lid, lid + 64, ... (at
// most 4, so head_dim <= 256). The sequence length is read from `state` once and made
// workgroup-uniform with workgroupUniformLoad, as the chunk loop contains barriers.

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

const WG: u32 = 64u;
const CHUNK: u32 = 256u;
const MAX_HEAD_DIM: u32 = 256u; // 4 dims per invocation
const NEG_MAX: f32 = -3.40282e38; // finite: exp(NEG_MAX - m) is 0, never NaN

var<workgroup> q_sh: array<f32, MAX_HEAD_DIM>;
var<workgroup> s_sh: array<f32, CHUNK>;
var<workgroup> red: array<f32, WG>;
var<workgroup> len_sh: u32;

fn reduce(lid: u32, v: f32, is_max: bool) -> f32 {
    red[lid] = v;
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lid < s {
            red[lid] = select(red[lid] + red[lid + s], max(red[lid], red[lid + s]), is_max);
        }
    }
    workgroupBarrier();
    let r = red[0];
    workgroupBarrier(); // red is reused by the next call
    return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    let hd = p.head_dim;
    if lid == 0u {
        // Keys 0..=pos+t are visible; 0 for the padding tokens of the dispatch.
        len_sh = select(0u, min(state.pos + t + 1u, p.n_ctx), t < state.n_tokens);
    }
    let len = workgroupUniformLoad(&len_sh);
    var first = 0u;
    if p.window != 0u && len > p.window {
        first = len - p.window;
    }
    let kv_base = (h / (p.n_head / p.n_head_kv)) * p.n_ctx * hd;
    let q_base = (t * p.n_head + h) * hd;
    for (var d = lid; d < hd; d += WG) {
        q_sh[d] = q[q_base + d] * p.scale;
    }
    workgroupBarrier();

    var m = NEG_MAX;
    var l = 0.0;
    var acc = array<f32, 4>();
    for (var c0 = first; c0 < len; c0 += CHUNK) {
        var cmax = NEG_MAX;
        for (var j = lid; j < CHUNK; j += WG) {
            var s = NEG_MAX;
            if c0 + j < len {
                let kb = kv_base + (c0 + j) * hd;
                s = 0.0;
                for (var d = 0u; d < hd; d++) {
                    s += q_sh[d] * f32(k_cache[kb + d]);
                }
            }
            s_sh[j] = s;
            cmax = max(cmax, s);
        }
        let m_new = max(m, reduce(lid, cmax, true));
        let corr = exp(m - m_new);
        var csum = 0.0;
        for (var j = lid; j < CHUNK; j += WG) {
            let e = select(0.0, exp(s_sh[j] - m_new), c0 + j < len);
            s_sh[j] = e;
            csum += e;
        }
        l = l * corr + reduce(lid, csum, false); // its barriers publish s_sh
        let n = min(CHUNK, len - c0);
        for (var i = 0u; i < 4u; i++) {
            let d = lid + i * WG;
            if d < hd {
                var a = acc[i] * corr;
                for (var j = 0u; j < n; j++) {
                    a += s_sh[j] * f32(v_cache[kv_base + (c0 + j) * hd + d]);
                }
                acc[i] = a;
            }
        }
        m = m_new;
        workgroupBarrier(); // s_sh is overwritten by the next chunk
    }
    if len == 0u {
        return;
    }
    for (var i = 0u; i < 4u; i++) {
        let d = lid + i * WG;
        if d < hd {
            out[q_base + d] = acc[i] / l;
        }
    }
}
