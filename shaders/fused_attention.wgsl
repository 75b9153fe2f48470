// Fused decode, dispatch 2 of 4 per layer: KV append + attention over a chunk of positions +
// that chunk's share of the output projection, for ATT_HG query heads of one KV group. One
// token.
//
// Workgroup (s, c, b) handles query heads h = s * ATT_HG .. s * ATT_HG + ATT_HG - 1 (all in
// one KV group: ATT_HG divides the group size, kernels::fused_layer::FusedShape::
// attention_heads_per_group) and key positions [c * ATT_CHUNK, (c + 1) * ATT_CHUNK) of the
// len = pos + 1 visible ones (flash-decoding's split over positions, so long contexts spread
// over many workgroups). Each key and value row it loads serves all ATT_HG heads. Per head it
// computes the chunk's max m, sum l = sum_j e_j, e_j = exp(s_j - m), and unnormalised output
// a = sum_j e_j v_j, then projects it at once onto block b of Wo's rows:
//   P[h, c] = Wo[:, h * head_dim .. (h + 1) * head_dim] a      (n_embd values)
// The projection is linear, so the next dispatch recovers Wo · attention exactly as
//   sum_{h, c} exp(m_{h,c} - M_h) / L_h * P[h, c],  M_h = max_c m, L_h = sum_c exp(m - M_h) l,
// which is what lets the output projection live here instead of in a dispatch of its own.
// When the context fits one chunk (len <= ATT_CHUNK), a is divided by l here, the workgroup's
// heads are summed into one partial (slot s, chunk 0: n_head / ATT_HG partials in all), and
// the combine is a plain sum of those.
// The host splits Wo's rows into blocks when there are few head-chunks (short contexts), so
// the projection still spreads over many workgroups; each block recomputes the chunk's
// attention (a few KiB from cache) rather than paying a dispatch boundary.
//
// Latency: the Wo weights of this invocation's first KP passes and the query are loaded first
// (later passes load theirs one pass ahead), and (without QK_NORM) this invocation's key row
// and its first VP value rows of the chunk, all before the state (whose load tells the step's
// position): their addresses depend only on the workgroup, the cache never changes during
// this dispatch, and rows past the visible ones are loaded but never used. So the scores wait
// on no memory, and at contexts up to VP value rows per invocation neither does the value
// phase. (With QK_NORM they are loaded after the state, because this dispatch appends row
// pos.)
// KP and VP are prepended per pipeline variant (single-chunk steps or any step;
// kernels::fused_layer::attention_preloads: more of both shorten the chain of memory round
// trips, at the cost of registers).
//
// KV append: every workgroup takes position pos from `qkv` itself, never from the cache. The
// new token's K and V are stored into the cache at pos by fused_ffn_down.wgsl, two dispatches
// later, except with QK_NORM (whose stored key is the normalised, rotated one computed here):
// then block 0 of the first query head of each KV group stores them, in the chunk that holds
// pos, and no workgroup of this dispatch reads a cache row written in it (no race). Rows < pos
// were written by earlier dispatches. `part` rows are PART_STRIDE floats: n_embd values, then
// m and l.
//
// Architecture switches (see fused_qkv.wgsl): with QK_NORM (always ATT_HG = 1), fused_qkv
// wrote Q and K unnormalised and unrotated; every workgroup normalises its query head and its
// KV group's new key (per-head RMS norm: one workgroup reduction over head_dim) and rotates
// both here, and the KV append stores the rotated key. A sliding window (p.window > 0: gemma3's
// local layers) masks positions below len - window; chunks wholly below it contribute m = -max, l =
// 0, which the combine weights to zero. p.scale is the model's attention scale; RoPE's (sin, cos)
// per pair at this position (per layer: gemma3's local and global layers differ) is in qkv's
// tail, where fused_qkv put it.
//
// O_SPLIT (prepended; kernels::fused_layer::o_split): the variant for single-chunk steps of
// models whose projection runs in fused_o_proj.wgsl. The grid is one chunk and one block; each
// workgroup writes its heads' normalised outputs to part[h * head_dim ..] and loads no Wo.
//
// Shape constants are prepended (see fused_qkv.wgsl). When state.done is set the kernel
// returns at once.

struct Params {
    scale: f32,       // the attention scale (1 / sqrt(head_dim) unless the model says otherwise)
    window: u32,      // visible positions of a sliding-window layer; 0: all
    eps: f32,
    q_norm_off: u32,  // per-head Q and K norm weights in `vecs` (QK_NORM)
    k_norm_off: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> lp: array<Params, N_LAYER>; // one per layer
var<private> p: Params; // this layer's
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> qkv: array<vec4<f32>>;             // [(n_q + 2 n_kv (+ n_rot: QK_NORM)) / 4]
@group(0) @binding(3) var<storage, read_write> k_cache: array<vec4<kv_t>>;  // [n_head_kv, n_ctx, head_dim / 4]
@group(0) @binding(4) var<storage, read_write> v_cache: array<vec4<kv_t>>;  // [n_head_kv, n_ctx, head_dim / 4]
@group(0) @binding(5) var<storage, read> wo: array<u32>;                    // [n_embd, n_head * head_dim]
@group(0) @binding(6) var<storage, read_write> part: array<f32>;            // [n_head, max_chunks, PART_STRIDE]
@group(0) @binding(7) var<storage, read> vecs: array<f32>;                  // the vector arena

const WG: u32 = 256u;
const HD4: u32 = HEAD_DIM / 4u;
const GROUP: u32 = N_HEAD / N_HEAD_KV;
const N_Q: u32 = N_HEAD * HEAD_DIM;
const N_KV: u32 = N_HEAD_KV * HEAD_DIM;
const PJ: u32 = WG / HD4;             // position lanes of the value phase
const UH: u32 = HEAD_DIM / 8u;        // units of one head in a row of Wo
const UG: u32 = ATT_HG * UH;          // units of the workgroup's heads in a row of Wo
const OL: u32 = 8u;                   // lanes per Wo row (oct_sum)
const UPL: u32 = (UG + OL - 1u) / OL; // units per lane
const RPP: u32 = WG / OL;             // Wo rows per pass
const NEG_MAX: f32 = -3.40282e38;

// The workgroup's queries (scaled), head after head; once the scores are done, the heads'
// attention outputs a in the same layout (so unit u of a Wo row pairs with vec4s 2u, 2u + 1).
var<workgroup> qa_sh: array<vec4<f32>, ATT_HG * HD4>;
var<workgroup> av_sh: array<vec4<f32>, WG>;
var<workgroup> e_sh: array<f32, ATT_HG * ATT_CHUNK>; // e_j of head i at i * ATT_CHUNK + j
var<workgroup> len_sh: u32;
// QK_NORM: the head's query and new key while they are normalised and rotated (QKN_LEN is
// head_dim with QK_NORM, else 1), then the new key as vec4s.
var<workgroup> qn_sh: array<f32, QKN_LEN>;
var<workgroup> kn_sh: array<f32, QKN_LEN>;
var<workgroup> knew_sh: array<vec4<f32>, (QKN_LEN + 3u) / 4u>;

fn kv4(v: vec4<kv_t>) -> vec4<f32> {
    return vec4<f32>(v);
}

// The new key's vec4 i: from workgroup memory when this kernel normalised it (QK_NORM).
fn new_key(k_new: u32, i: u32) -> vec4<f32> {
    if QK_NORM {
        return knew_sh[i];
    }
    return qkv[k_new + i];
}

fn qkv1(i: u32) -> f32 {
    return qkv[i / 4u][i % 4u];
}

// The dim of a head that RoPE pairs with dim `d` (itself past n_rot).
fn rope_partner(d: u32) -> u32 {
    if d >= N_ROT {
        return d;
    }
    if NEOX {
        return select(d + N_ROT / 2u, d - N_ROT / 2u, d >= N_ROT / 2u);
    }
    return d ^ 1u;
}

// The query's and the new key's value at dim `d` rotated together: `mine` holds (query, key) at
// d, `other` at its partner (`rope_partner`); as in fused_qkv.wgsl, x0 is the pair's first
// member, x1 its second. The pair's (sin, cos) at this position is in qkv's tail (fused_qkv).
fn rotate2(mine: vec2<f32>, other: vec2<f32>, d: u32) -> vec2<f32> {
    if d >= N_ROT {
        return mine;
    }
    var pair = d / 2u;
    var first = d % 2u == 0u;
    if NEOX {
        pair = d % (N_ROT / 2u);
        first = d < N_ROT / 2u;
    }
    let t = N_Q + 2u * N_KV + 2u * pair;
    let sc = vec2<f32>(qkv1(t), qkv1(t + 1u));
    let x0 = select(other, mine, first);
    let x1 = select(mine, other, first);
    return select(x0 * sc.x + x1 * sc.y, x0 * sc.y - x1 * sc.x, first);
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
    let h = wg.x * ATT_HG; // the workgroup's first query head
    let c = wg.y;
    // Rows of Wo this workgroup projects: block wg.z of nwg.z.
    let per_block = (((N_EMBD + nwg.z - 1u) / nwg.z + RPP - 1u) / RPP) * RPP;
    let r_begin = min(wg.z * per_block, N_EMBD);
    let r_end = min(r_begin + per_block, N_EMBD);
    let lead = wg.z == 0u; // writes the KV append and (m, l)
    let ol = lid % OL;
    let rr = lid / OL;

    // Loads that need nothing: this invocation's Wo units for the first KP passes, the query.
    var raw: array<vec4<u32>, KP * UPL>;
    // (Passes past this block's rows load the next block's rows, unused: guarding the loads
    // with a branch measured slower than the wasted loads, which other workgroups share in L2.)
    for (var k = 0u; k < KP && !O_SPLIT; k++) {
        let row = min(r_begin + rr + k * RPP, N_EMBD - 1u);
        for (var m = 0u; m < UPL; m++) {
            let u = min(ol + m * OL, UG - 1u);
            raw[k * UPL + m] = wo_fetch(row, h * UH + u, N_Q);
        }
    }
    if lid < ATT_HG * HD4 && !QK_NORM {
        qa_sh[lid] = qkv[h * HD4 + lid] * p.scale;
    }
    let g = h / GROUP;
    let cache = kv_base + g * N_CTX * HD4;  // this KV head's cache rows (vec4s)
    let c0 = c * ATT_CHUNK;
    // Without QK_NORM: this invocation's key row and first VP value rows, before the state.
    let d4 = lid % HD4;
    let pj = lid / HD4;
    var kr: array<vec4<f32>, HD4>;
    var vv: array<vec4<f32>, VP>;
    if !QK_NORM {
        let t = min(c0 + lid, N_CTX - 1u);
        for (var i = 0u; i < HD4; i++) {
            kr[i] = kv4(k_cache[cache + t * HD4 + i]);
        }
        for (var k = 0u; k < VP; k++) {
            let tv = min(c0 + pj + k * PJ, N_CTX - 1u);
            vv[k] = kv4(v_cache[cache + tv * HD4 + d4]);
        }
    }
    if lid == 0u {
        // 0 when done, or when this chunk starts past the visible positions.
        let len = state.pos + 1u;
        len_sh = select(0u, len, state.done == 0u && c * ATT_CHUNK < len);
    }
    let len = workgroupUniformLoad(&len_sh); // also publishes qa_sh
    if len == 0u {
        return;
    }
    let pos = len - 1u;
    let k_new = (N_Q + g * HEAD_DIM) / 4u;  // this KV head's new key in qkv (vec4s)
    let v_new = (N_Q + N_KV + g * HEAD_DIM) / 4u;
    let n = min(ATT_CHUNK, len - c0);
    // Positions below `lo` are outside a sliding window.
    let lo = select(0u, len - p.window, p.window != 0u && len > p.window);

    if QK_NORM {
        var qv = 0.0;
        var kv = 0.0;
        if lid < HEAD_DIM {
            qv = qkv1(h * HEAD_DIM + lid);
            kv = qkv1(N_Q + g * HEAD_DIM + lid);
        }
        let ss = lanes_sum4(lid, vec4<f32>(qv * qv, kv * kv, 0.0, 0.0), WG);
        if lid < HEAD_DIM {
            let sq = inverseSqrt(ss.x / f32(HEAD_DIM) + p.eps);
            let sk = inverseSqrt(ss.y / f32(HEAD_DIM) + p.eps);
            qn_sh[lid] = qv * sq * vecs[p.q_norm_off + lid];
            kn_sh[lid] = kv * sk * vecs[p.k_norm_off + lid];
        }
        workgroupBarrier();
        var qk = vec2<f32>(0.0);
        if lid < HEAD_DIM {
            let o = rope_partner(lid);
            qk = rotate2(vec2<f32>(qn_sh[lid], kn_sh[lid]), vec2<f32>(qn_sh[o], kn_sh[o]), lid);
        }
        workgroupBarrier();
        if lid < HEAD_DIM {
            qn_sh[lid] = qk.x * p.scale;
            kn_sh[lid] = qk.y;
        }
        workgroupBarrier();
        if lid < HD4 {
            let i = 4u * lid;
            qa_sh[lid] = vec4<f32>(qn_sh[i], qn_sh[i + 1u], qn_sh[i + 2u], qn_sh[i + 3u]);
            knew_sh[lid] = vec4<f32>(kn_sh[i], kn_sh[i + 1u], kn_sh[i + 2u], kn_sh[i + 3u]);
        }
        workgroupBarrier();
    }

    if QK_NORM && lid < HD4 && lead && h % GROUP == 0u && pos < c0 + n && pos < N_CTX {
        k_cache[cache + pos * HD4 + lid] = vec4<kv_t>(new_key(k_new, lid));
        v_cache[cache + pos * HD4 + lid] = vec4<kv_t>(qkv[v_new + lid]);
    }

    // Value phase mapping (used below): invocation (d4, pj) sums positions pj, pj + PJ, ...
    // With QK_NORM its first VP value vectors are loaded now, before the keys.
    if QK_NORM {
        for (var k = 0u; k < VP; k++) {
            let j = pj + k * PJ;
            let t = c0 + j;
            if j < n && t != pos {
                vv[k] = kv4(v_cache[cache + t * HD4 + d4]);
            } else {
                vv[k] = vec4<f32>();
            }
        }
    }

    // Score phase: one key per invocation, its HD4 vec4 loads all in flight, dotted with each
    // of the workgroup's queries. (Lanes along head_dim coalesce better, but the cross-lane
    // sums cost more than they save from 128 positions on: measured on an H200, 921 vs 825
    // tok/s at a 128-token prompt.)
    var s = vec4<f32>(NEG_MAX);
    let visible = lid < n && c0 + lid >= lo;
    if visible {
        let t = c0 + lid;
        var sa: array<vec4<f32>, ATT_HG>;
        for (var d = 0u; d < HD4; d++) {
            var kd = kr[d];
            if t == pos {
                kd = new_key(k_new, d);
            } else if QK_NORM {
                kd = kv4(k_cache[cache + t * HD4 + d]);
            }
            for (var i = 0u; i < ATT_HG; i++) {
                sa[i] += kd * qa_sh[i * HD4 + d];
            }
        }
        for (var i = 0u; i < ATT_HG; i++) {
            s[i] = (sa[i].x + sa[i].y) + (sa[i].z + sa[i].w);
        }
    }
    let m = wg_max4(lid, s);
    let e = select(vec4<f32>(), exp(s - m), visible);
    for (var i = 0u; i < ATT_HG; i++) {
        e_sh[i * ATT_CHUNK + lid] = e[i];
    }
    let l = lanes_sum4(lid, e, WG); // its barriers publish e_sh

    // Value phase: a_i[d] = sum_j e_ij v_j[d] for each head i.
    var acc: array<vec4<f32>, ATT_HG>;
    for (var k = 0u; k < VP; k++) {
        let j = pj + k * PJ;
        if j < n {
            if c0 + j == pos {
                vv[k] = qkv[v_new + d4];
            }
            for (var i = 0u; i < ATT_HG; i++) {
                acc[i] += e_sh[i * ATT_CHUNK + j] * vv[k];
            }
        }
    }
    var j = pj + VP * PJ;
    for (; j + 3u * PJ < n; j += 4u * PJ) {
        // Positions j .. j + 3 PJ: all < pos except possibly the last.
        let b = cache + (c0 + j) * HD4 + d4;
        let w0 = kv4(v_cache[b]);
        let w1 = kv4(v_cache[b + PJ * HD4]);
        let w2 = kv4(v_cache[b + 2u * PJ * HD4]);
        var w3 = vec4<f32>();
        if c0 + j + 3u * PJ == pos {
            w3 = qkv[v_new + d4];
        } else {
            w3 = kv4(v_cache[b + 3u * PJ * HD4]);
        }
        for (var i = 0u; i < ATT_HG; i++) {
            let e = i * ATT_CHUNK + j;
            acc[i] += e_sh[e] * w0 + e_sh[e + PJ] * w1 + e_sh[e + 2u * PJ] * w2
                + e_sh[e + 3u * PJ] * w3;
        }
    }
    for (; j < n; j += PJ) {
        let t = c0 + j;
        var v = vec4<f32>();
        if t == pos {
            v = qkv[v_new + d4];
        } else {
            v = kv4(v_cache[cache + t * HD4 + d4]);
        }
        for (var i = 0u; i < ATT_HG; i++) {
            acc[i] += e_sh[i * ATT_CHUNK + j] * v;
        }
    }
    // Sum over the PJ position lanes, head after head, into qa_sh (the queries are no longer
    // read: the reductions above had barriers after the last score).
    for (var i = 0u; i < ATT_HG; i++) {
        av_sh[lid] = acc[i];
        workgroupBarrier();
        if lid < HD4 {
            var a = vec4<f32>();
            for (var r = 0u; r < PJ; r++) {
                a += av_sh[r * HD4 + lid];
            }
            // The only chunk (len <= ATT_CHUNK): normalise here, so the combine just adds.
            if len <= ATT_CHUNK {
                a /= l[i];
            }
            qa_sh[i * HD4 + lid] = a;
            if O_SPLIT {
                // Only single-chunk steps use this variant: the head's output, normalised.
                let at = (h + i) * HEAD_DIM + 4u * lid;
                part[at] = a.x;
                part[at + 1u] = a.y;
                part[at + 2u] = a.z;
                part[at + 3u] = a.w;
            }
        }
        workgroupBarrier();
    }
    if O_SPLIT {
        return; // fused_o_proj.wgsl projects
    }

    // Projection: OL lanes per row of Wo, RPP rows per pass; the first KP passes use the
    // weights loaded at the start (constant indices keep them in registers). Component i of a
    // lane's sum is head i's share; with one chunk the heads' shares are summed into one
    // partial (slot wg.x), else each head writes its own (slot h + i, chunk c).
    let single = len <= ATT_CHUNK;
    let passes = (r_end - r_begin + RPP - 1u) / RPP;
    // Passes from KP on: each one's weights are loaded one pass ahead (pass KP's now).
    var nxt: array<vec4<u32>, UPL>;
    if KP < passes {
        let rowc = min(r_begin + rr + KP * RPP, N_EMBD - 1u);
        for (var mm = 0u; mm < UPL; mm++) {
            nxt[mm] = wo_fetch(rowc, h * UH + min(ol + mm * OL, UG - 1u), N_Q);
        }
    }
    for (var k = 0u; k < KP; k++) {
        if k < passes {
            var y = vec4<f32>();
            let row = r_begin + rr + k * RPP;
            let rowc = min(row, N_EMBD - 1u);
            for (var mm = 0u; mm < UPL; mm++) {
                let u = ol + mm * OL;
                if u < UG {
                    let wv = wo_decode(raw[k * UPL + mm], rowc, h * UH + u, N_Q);
                    y[u / UH] += dot8(wv, W8(qa_sh[2u * u], qa_sh[2u * u + 1u]));
                }
            }
            store_row(lid, ol, row, r_end, y, single, wg.x, c);
        }
    }
    for (var k = KP; k < passes; k++) {
        var y = vec4<f32>();
        let row = r_begin + rr + k * RPP;
        let rowc = min(row, N_EMBD - 1u);
        let cur = nxt;
        if k + 1u < passes {
            let rown = min(row + RPP, N_EMBD - 1u);
            for (var mm = 0u; mm < UPL; mm++) {
                nxt[mm] = wo_fetch(rown, h * UH + min(ol + mm * OL, UG - 1u), N_Q);
            }
        }
        for (var mm = 0u; mm < UPL; mm++) {
            let u = ol + mm * OL;
            if u < UG {
                let wv = wo_decode(cur[mm], rowc, h * UH + u, N_Q);
                y[u / UH] += dot8(wv, W8(qa_sh[2u * u], qa_sh[2u * u + 1u]));
            }
        }
        store_row(lid, ol, row, r_end, y, single, wg.x, c);
    }
    if lid < ATT_HG && lead && !single {
        let out = ((h + lid) * MAX_CHUNKS + c) * PART_STRIDE;
        part[out + N_EMBD] = m[lid];
        part[out + N_EMBD + 1u] = l[lid];
    }
}

// Row `row`'s partial from each lane's per-head sums y, for the workgroup of slot s (call
// uniformly; `single` is uniform).
fn store_row(
    lid: u32, ol: u32, row: u32, r_end: u32, y: vec4<f32>, single: bool, s: u32, c: u32,
) {
    if single || ATT_HG == 1u {
        let t = oct_sum(lid, (y.x + y.y) + (y.z + y.w));
        if ol == 0u && row < r_end {
            // one chunk: the heads' sum, slot s; else (ATT_HG = 1) head s's chunk c.
            part[(s * MAX_CHUNKS + c) * PART_STRIDE + row] = t;
        }
    } else {
        let t = oct_sum4(lid, y);
        if ol == 0u && row < r_end {
            for (var i = 0u; i < ATT_HG; i++) {
                part[((s * ATT_HG + i) * MAX_CHUNKS + c) * PART_STRIDE + row] = t[i];
            }
        }
    }
}
