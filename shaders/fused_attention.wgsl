// Fused decode, dispatch 2 of 4 per layer: KV append + attention over a chunk of positions +
// that chunk's share of the output projection, for one query head. One token.
//
// Workgroup (h, c) handles query head h and key positions [c * CHUNK, (c + 1) * CHUNK) of
// the len = pos + 1 visible ones (flash-decoding's split over positions, so long contexts
// spread over many workgroups). It computes the chunk's running max m, sum l = sum_j e_j,
// e_j = exp(s_j - m), and unnormalised output a = sum_j e_j v_j, then projects it at once:
//   P[h, c] = Wo[:, h * head_dim .. (h + 1) * head_dim] a      (n_embd values)
// The projection is linear, so the next dispatch recovers Wo · attention exactly as
//   sum_{h, c} exp(m_{h,c} - M_h) / L_h * P[h, c],  M_h = max_c m, L_h = sum_c exp(m - M_h) l,
// which is what lets the output projection live here instead of in a dispatch of its own.
//
// KV append: the new token's K and V (from fused_qkv) are written into the cache at pos by
// the workgroup of the first query head of each KV group whose chunk holds pos; every
// workgroup reads position pos from `qkv` itself, never from the cache, so no workgroup
// reads a cache row written in this dispatch (no race). Rows < pos were written by earlier
// dispatches.
//
// When state.done is set the kernel returns at once.

struct Params {
    n_head: u32,
    n_head_kv: u32,
    head_dim: u32,
    n_ctx: u32,      // cache capacity in positions
    n_embd: u32,     // rows of Wo
    max_chunks: u32, // chunk slots per head in `part`
    scale: f32,      // 1 / sqrt(head_dim)
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;             // [n_q + 2 n_kv]
@group(0) @binding(3) var<storage, read_write> k_cache: array<kv_t>;  // [n_head_kv, n_ctx, head_dim]
@group(0) @binding(4) var<storage, read_write> v_cache: array<kv_t>;  // [n_head_kv, n_ctx, head_dim]
@group(0) @binding(5) var<storage, read> wo: array<u32>;              // [n_embd, n_head * head_dim]
@group(0) @binding(6) var<storage, read_write> part: array<f32>;      // [n_head, max_chunks, n_embd + 2]

const WG: u32 = 256u;
const CHUNK: u32 = 256u;        // must match kernels::fused::ATTENTION_CHUNK
const MAX_HEAD_DIM: u32 = 256u;
const OUT_LANES: u32 = 8u;      // lanes per Wo row in the projection
const RPT: u32 = 8u;            // Wo rows per invocation per step
const NEG_MAX: f32 = -3.40282e38;

var<workgroup> q_sh: array<f32, MAX_HEAD_DIM>;
var<workgroup> a_sh: array<f32, MAX_HEAD_DIM>;
var<workgroup> e_sh: array<f32, CHUNK>;
var<workgroup> red: array<f32, WG>;
var<workgroup> proj: array<f32, WG * RPT>;
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
    workgroupBarrier();
    return r;
}

fn a_load8(u: u32) -> W8 {
    let i = 8u * u;
    return W8(
        vec4<f32>(a_sh[i], a_sh[i + 1u], a_sh[i + 2u], a_sh[i + 3u]),
        vec4<f32>(a_sh[i + 4u], a_sh[i + 5u], a_sh[i + 6u], a_sh[i + 7u]),
    );
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let h = wg.x;
    let c = wg.y;
    // Rows of Wo this workgroup projects: block wg.z of nwg.z (the host splits the rows when
    // there are few head-chunks, so short contexts still spread over many workgroups).
    let per_block = (((p.n_embd + nwg.z - 1u) / nwg.z + 31u) / 32u) * 32u;
    let r_begin = min(wg.z * per_block, p.n_embd);
    let r_end = min(r_begin + per_block, p.n_embd);
    let lead = wg.z == 0u; // writes the KV append and (m, l)
    if lid == 0u {
        // 0 when done, or when this chunk starts past the visible positions.
        let len = state.pos + 1u;
        len_sh = select(0u, len, state.done == 0u && c * CHUNK < len);
    }
    let len = workgroupUniformLoad(&len_sh);
    if len == 0u {
        return;
    }
    let pos = len - 1u;
    let hd = p.head_dim;
    let group = p.n_head / p.n_head_kv;
    let g = h / group;
    let n_q = p.n_head * hd;
    let n_kv = p.n_head_kv * hd;
    let k_new = n_q + g * hd;  // this KV head's new key in qkv
    let v_new = n_q + n_kv + g * hd;
    let cache = g * p.n_ctx * hd;
    let c0 = c * CHUNK;
    let n = min(CHUNK, len - c0);

    for (var d = lid; d < hd; d += WG) {
        q_sh[d] = qkv[h * hd + d] * p.scale;
        if lead && h % group == 0u && pos < c0 + n && pos < p.n_ctx {
            k_cache[cache + pos * hd + d] = kv_t(qkv[k_new + d]);
            v_cache[cache + pos * hd + d] = kv_t(qkv[v_new + d]);
        }
    }
    workgroupBarrier();

    // One position per invocation: its score.
    var s = NEG_MAX;
    if lid < n {
        let t = c0 + lid;
        s = 0.0;
        if t == pos {
            for (var d = 0u; d < hd; d++) {
                s += q_sh[d] * qkv[k_new + d];
            }
        } else {
            let kb = cache + t * hd;
            // 8 independent loads per iteration (head_dim % 8 == 0) keep the memory busy.
            var s2 = vec4<f32>();
            for (var d = 0u; d < hd; d += 8u) {
                let a = vec4<f32>(f32(k_cache[kb + d]), f32(k_cache[kb + d + 1u]),
                                  f32(k_cache[kb + d + 2u]), f32(k_cache[kb + d + 3u]));
                let b = vec4<f32>(f32(k_cache[kb + d + 4u]), f32(k_cache[kb + d + 5u]),
                                  f32(k_cache[kb + d + 6u]), f32(k_cache[kb + d + 7u]));
                s2 += a * vec4<f32>(q_sh[d], q_sh[d + 1u], q_sh[d + 2u], q_sh[d + 3u])
                    + b * vec4<f32>(q_sh[d + 4u], q_sh[d + 5u], q_sh[d + 6u], q_sh[d + 7u]);
            }
            s = s2.x + s2.y + s2.z + s2.w;
        }
    }
    let m = reduce(lid, s, true);
    let e = select(0.0, exp(s - m), lid < n);
    e_sh[lid] = e;
    let l = reduce(lid, e, false); // its barriers publish e_sh

    // a[d] = sum_j e_j v_j[d]: WG / hd invocations per dim, each over a stride of positions.
    let per_dim = max(WG / hd, 1u);
    let d = lid % hd;
    let part_j = lid / hd;
    var acc = 0.0;
    if part_j < per_dim && lid < per_dim * hd {
        // Cached positions (< pos) four at a time with independent loads; pos from qkv.
        let cached = min(n, pos - c0); // positions j with c0 + j < pos (c0 <= pos here)
        var a4 = vec4<f32>();
        var j = part_j;
        for (; j + 3u * per_dim < cached; j += 4u * per_dim) {
            let vb = cache + (c0 + j) * hd + d;
            let st = per_dim * hd;
            a4 += vec4<f32>(e_sh[j], e_sh[j + per_dim], e_sh[j + 2u * per_dim], e_sh[j + 3u * per_dim])
                * vec4<f32>(f32(v_cache[vb]), f32(v_cache[vb + st]), f32(v_cache[vb + 2u * st]),
                            f32(v_cache[vb + 3u * st]));
        }
        for (; j < n; j += per_dim) {
            let t = c0 + j;
            var v = 0.0;
            if t == pos {
                v = qkv[v_new + d];
            } else {
                v = f32(v_cache[cache + t * hd + d]);
            }
            acc += e_sh[j] * v;
        }
        acc += (a4.x + a4.y) + (a4.z + a4.w);
    }
    red[lid] = acc;
    workgroupBarrier();
    if lid < hd {
        var a = 0.0;
        for (var j = 0u; j < per_dim; j++) {
            a += red[j * hd + lid];
        }
        a_sh[lid] = a;
    }
    workgroupBarrier();

    // P = Wo[:, head h's columns] a: OUT_LANES lanes per row; each invocation accumulates RPT
    // rows at once (independent loads in flight), then one invocation per row sums its lanes.
    let units = hd / 8u;        // head_dim % 8 == 0
    let u0 = h * units;         // first unit of head h in a row of Wo
    let lane = lid % OUT_LANES;
    let rows_per_step = WG / OUT_LANES;
    let out = (h * p.max_chunks + c) * (p.n_embd + 2u);
    for (var b0 = r_begin; b0 < r_end; b0 += rows_per_step * RPT) {
        for (var i = 0u; i < RPT; i++) {
            let row = b0 + i * rows_per_step + lid / OUT_LANES;
            var y = 0.0;
            if row < r_end {
                for (var u = lane; u < units; u += OUT_LANES) {
                    y += dot8(wo_load8(row, u0 + u, n_q), a_load8(u));
                }
            }
            proj[i * WG + lid] = y;
        }
        workgroupBarrier();
        let row = b0 + lid;
        if lid < rows_per_step * RPT && row < r_end {
            let at = (lid / rows_per_step) * WG + (lid % rows_per_step) * OUT_LANES;
            var y = 0.0;
            for (var j = 0u; j < OUT_LANES; j++) {
                y += proj[at + j];
            }
            part[out + row] = y;
        }
        workgroupBarrier();
    }
    if lid == 0u && lead {
        part[out + p.n_embd] = m;
        part[out + p.n_embd + 1u] = l;
    }
}
