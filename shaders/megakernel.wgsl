// The megakernel (portable version): a whole generation — prompt ingestion, then every decode
// step with the GPU sampler choosing each next token — in ONE workgroup of 256 invocations
// that loops in the shader. A dispatch carries on from `state.pos` (the next position to
// process) and chooses up to `p.steps` tokens, ingesting what is left of the prompt first (at
// most PROMPT_POSITIONS (prepended: kernels::MEGAKERNEL_PROMPT_POSITIONS) + steps positions per
// dispatch, so a long prompt takes several and an abort waits for one); the
// host records ceil(max_tokens / steps) dispatches — one when steps covers the generation and
// the prompt is short.
// A dispatch may also end early: lavapipe (llvmpipe) caps the loop iterations of one
// invocation (~65k back-edges over all loops) and silently leaves every loop past that. State
// is always consistent at a position boundary, so the host reads `state` with the tokens and
// records more dispatches until the generation is complete.
//
// Per position c (the token id is tokens[c]): embed; per layer RMS norm, Q/K/V projections,
// RoPE, K/V stored at row c of the cache, attention over rows 0..=c (grouped-query), output
// projection + residual, RMS norm, gate/up, SwiGLU, down projection + residual; then, from the
// last prompt position on, final norm, head, penalties and the choice of token c + 1 (greedy:
// argmax, lowest id on ties; sampling: per-slice top-128 selection, merge, and `draw` from
// sample_draw.wgsl — the fused path's selection and arithmetic) and its bookkeeping
// (`commit`). A stop id sets state.done and the loop ends.
//
// f32 settings (EPS, THETA_SCALE, ATT_SCALE) are prepended as exact bit patterns (`*_BITS`):
// WGSL has no constant-expression bitcast, and a decimal literal could round differently.
//
// Memory: weights (every matrix in its ggml GPU format, norm weights as f32) live in one
// arena buffer, each matrix starting at a whole row so the format's decoder (prepended,
// renamed `wf<id>_*`, reading `arena`) takes a global row index (`row_base + r`); the tensor
// table sits at the arena's start (layout: `kernels::megakernel`). The residual stream and the
// matrix-vector input live in workgroup memory when they fit the adapter's
// maxComputeWorkgroupStorageSize (SHARED), else in the storage scratch `s` (same code; wider
// models still run, reading them from cache). Everything else — Q, the attention scores and
// output, the FFN activations, logits, candidate lists — is in the scratch (f32 as u32 bits):
// in workgroup memory too when the whole scratch fits (SCRATCH_SHARED, toy-sized models),
// else in `s`.
//
// Synchronization argument (why there are no races). There is one workgroup, so every
// reader and writer of every buffer is an invocation of it, and the phase barriers order
// them: all invocations arrive, and the writes before the barrier are visible to all after
// it — workgroup memory through workgroupBarrier, storage through storageBarrier, which the
// phase barriers add only where a phase's data is in storage (`sync`: the scratch unless
// SCRATCH_SHARED; `sync_res`: the residual and matrix input unless SHARED or SCRATCH_SHARED;
// WGSL's storageBarrier has device scope and is not free). Every phase below writes only
// locations that no other invocation reads or writes in the same phase, and reads only what
// earlier phases wrote. The exceptions are by design:
// (a) an invocation re-reading its own writes (program order suffices): attention scores
//     s[sc + j] are written and then exponentiated by lane j % ATT_G of the head's slot; the residual
//     elements `add_norm_to_vin` adds to and then normalises;
// (b) the reduction helpers (megakernel_reduce_*.wgsl), which write their own slot of `red4`
//     / `red_u` and reread others' only after workgroupBarrier, and end with a barrier so the
//     array can be reused;
// (c) the K/V cache: row c is written by `rope_store` (portable) or the KV group's first
//     head's workgroup (grid) and read by later positions only, after the step's closing
//     `gsync()` (storageBarrier); position c's attention reads row c from the workgroup's
//     copy (`kc_sh` / `vc_sh`);
// (d) `state`, `tokens`[c + 1] and `counts`, written only by invocation 0 (commit, or the
//     prompt's cursor move) and read by all only after the step's closing `gsync()`;
// (e) write after read across a `sync_res` alone: a later phase may overwrite a storage
//     scratch word an earlier phase read, but every such read's value is consumed (stored
//     or reduced) before the barrier, so the read is complete.
// The loop bounds and every branch around a barrier depend only on constants, the uniform
// `p`, read-only storage (`arena`, `sampler`: uniform by WGSL's analysis) or values
// broadcast by workgroupUniformLoad, so all 256 invocations reach every barrier together
// (WGSL's uniformity analysis checks it).
//
// Grid mode (GRID_MODE, the opt-in `megakernel-grid` strategy; native only; its barrier,
// discovery and phases are in megakernel_grid.wgsl, composed after this file): the same
// generation in GRID persistent workgroups that meet at grid barriers (`gsync`). Every
// workgroup keeps its own copy of the residual stream and the matrix input in workgroup
// memory and updates it redundantly (embed, norms, residual adds, SwiGLU: cheap, and no
// barrier needed for them); the matrix-vector products split their rows (passes of RPP rows)
// over the workgroups, attention splits its heads, the head its rows with a per-workgroup
// argmax. Per layer: QKV | attention (each head's workgroup rotates its Q, K and V of position
// c itself; the group's first head stores K/V row c) | Wo | gate/up | down, each ending in a
// grid barrier: 5 per layer, 3 per token more for the choice and its commit.
// Synchronization argument, grid mode. Workgroups exchange data only through `s`, `kv`,
// `state`, `tokens` and `counts`, all declared @coherent (L1-bypassing: SPIR-V Coherent),
// and only across a `gsync()`: every invocation's storageBarrier (device-scope release), then
// invocation 0's atomicAdd of the arrival counter, its spin until GRID × (barriers so far)
// arrivals, a workgroupBarrier and every invocation's storageBarrier (acquire). Between two
// grid barriers a phase writes locations no other workgroup reads or writes in that phase
// (disjoint rows; disjoint heads, whose score rows are per head; K/V row c of a KV group
// only by its first head's workgroup while the others use their own copy of row c), and a
// location read in a phase is rewritten only after a later barrier: QKV writes S_TMP, Wo and
// down S_OUT (never S_TMP, which the next layer's QKV may write while another workgroup still
// adds S_OUT into its residual), gate/up S_GATE/S_UP. The head's choice is committed by
// workgroup 0 between two barriers and read by all after the second. WebGPU promises neither
// this memory model nor that GRID workgroups run at once, so: this mode is compiled natively
// only (wgpu's MEMORY_DECORATION_COHERENT), GRID comes from an occupancy discovery on the same
// pipeline (`discover`), and every spin is bounded (SPIN_MAX polls): a timeout sets an error
// flag that releases every waiter, nothing more is committed and the host gets a typed error.


struct Params {
    n_prompt: u32, // prompt tokens: tokens[0..n_prompt] are the host's
    end: u32,      // the last position to process + 1 (n_prompt + max_tokens - 1)
    steps: u32,    // tokens chosen per dispatch (the first also ingests the prompt); 0: the
                   // occupancy discovery (grid mode)
    n_lists: u32,  // candidate lists of 1024 logits (sampling)
    ctab: u32,     // constrained generation: the constraint's DFA state is s[ctab] and its
                   // table (kernels::constraint's layout) starts at s[ctab + 1]; 0: none
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) /*coherent*/ var<storage, read_write> state: State;
@group(0) @binding(2) var<storage, read> arena: array<u32>;        // table + weights
@group(0) @binding(3) var<storage, read> sampler: Sampler;
@group(0) @binding(4) /*coherent*/ var<storage, read_write> kv: array<f32>;     // [layer][K, V][kv head][N_CTX][HEAD_DIM]
@group(0) @binding(5) /*coherent*/ var<storage, read_write> s: array<u32>;      // scratch (f32 bits)
@group(0) @binding(6) /*coherent*/ var<storage, read_write> tokens: array<u32>; // [N_CTX]
@group(0) @binding(7) /*coherent*/ var<storage, read_write> counts: array<u32>; // [vocab] penalty window
// Grid mode (`grid_sync`): [arrivals, error flags, discovery poll closed, discovery tickets], zeroed by the
// host before every dispatch. Unused by the portable version.
@group(0) @binding(8) var<storage, read_write> grid_sync: array<atomic<u32>, 4>;

const WG: u32 = 256u;
const RPP: u32 = WG / ML; // matrix row slots (ML lanes each); RPI rows per slot per pass
const N_Q: u32 = N_HEAD * HEAD_DIM;
const N_KV: u32 = N_HEAD_KV * HEAD_DIM;
const GROUP: u32 = N_HEAD / N_HEAD_KV;
const ATT_G: u32 = WG / ATT_HP; // attention: lanes per head, ATT_HP heads at a time (grid: 1)
const ATT_PARTS: u32 = ATT_G / HEAD_DIM; // value rows split over this many groups of lanes
const G_TIMEOUT: u32 = 1u; // grid error flags
const G_CUT: u32 = 2u;

var<workgroup> res_sh: array<f32, SH_LEN>; // the residual stream (SHARED)
var<workgroup> vin_sh: array<f32, VIN_LEN>; // the matrix-vector input (SHARED)
var<workgroup> qh_sh: array<f32, GA_LEN>;   // grid attention: the head's rotated Q
var<workgroup> kc_sh: array<f32, N_KV>;    // K (rotated) and V of position c, every KV head
var<workgroup> vc_sh: array<f32, N_KV>;
var<workgroup> ok_sh: u32;
var<private> gb_n: u32; // grid barriers passed in this dispatch
var<workgroup> flag_sh: u32;
var<workgroup> cut_sh: u32;

// The barrier that ends a phase whose results are in the scratch: a storage barrier too
// only when the scratch is the storage buffer. (WGSL's storageBarrier has device memory scope:
// on NVIDIA it costs ~1 µs, like a grid barrier; a workgroupBarrier alone ~20–50 ns.)
fn sync() {
    if !SCRATCH_SHARED {
        storageBarrier();
    }
    workgroupBarrier();
}

// The barrier that ends a phase writing the residual stream or the matrix-vector input: in
// workgroup memory when SHARED or SCRATCH_SHARED, else in the storage scratch.
fn sync_res() {
    if !SHARED && !SCRATCH_SHARED {
        storageBarrier();
    }
    workgroupBarrier();
}

var<workgroup> s_sh: array<u32, S_SH_LEN>; // the whole scratch (SCRATCH_SHARED)

// Word i of the scratch: in workgroup memory when all of it fits (SCRATCH_SHARED: small
// models, where every phase then avoids a round trip to L2), else in the storage buffer.
fn sword(i: u32) -> u32 {
    if SCRATCH_SHARED {
        return s_sh[i];
    }
    return s[i];
}

fn sword_set(i: u32, v: u32) {
    if SCRATCH_SHARED {
        s_sh[i] = v;
    } else {
        s[i] = v;
    }
}

fn sget(i: u32) -> f32 {
    return bitcast<f32>(sword(i));
}

fn sset(i: u32, v: f32) {
    sword_set(i, bitcast<u32>(v));
}

fn sget4(i: u32) -> vec4<f32> {
    return bitcast<vec4<f32>>(vec4<u32>(sword(i), sword(i + 1u), sword(i + 2u), sword(i + 3u)));
}

fn res_get(i: u32) -> f32 {
    if SHARED {
        return res_sh[i];
    }
    return sget(S_RES + i);
}

fn res_set(i: u32, v: f32) {
    if SHARED {
        res_sh[i] = v;
    } else {
        sset(S_RES + i, v);
    }
}

fn vin_set(i: u32, v: f32) {
    if SHARED {
        vin_sh[i] = v;
    } else {
        sset(S_VIN + i, v);
    }
}

// Elements [8u, 8u + 8) of the matrix-vector input: the normalised vector (src == NONE),
// SwiGLU of the FFN's gate and up projections (src == S_GATE: computed here, which saves
// the portable version a phase and its barrier), or s[src..].
fn in8(src: u32, u: u32) -> W8 {
    let i = 8u * u;
    if src == S_GATE {
        let g = W8(sget4(S_GATE + i), sget4(S_GATE + i + 4u));
        let v = W8(sget4(S_UP + i), sget4(S_UP + i + 4u));
        return W8(
            vec4<f32>(silu(g.a.x), silu(g.a.y), silu(g.a.z), silu(g.a.w)) * v.a,
            vec4<f32>(silu(g.b.x), silu(g.b.y), silu(g.b.z), silu(g.b.w)) * v.b,
        );
    }
    if src == NONE && SHARED {
        return W8(
            vec4<f32>(vin_sh[i], vin_sh[i + 1u], vin_sh[i + 2u], vin_sh[i + 3u]),
            vec4<f32>(vin_sh[i + 4u], vin_sh[i + 5u], vin_sh[i + 6u], vin_sh[i + 7u]),
        );
    }
    let b = select(src, S_VIN, src == NONE) + i;
    return W8(sget4(b), sget4(b + 4u));
}

fn arena_f32(i: u32) -> f32 {
    return bitcast<f32>(arena[i]);
}

// The arena's tensor table, copied into workgroup memory when the dispatch starts: every
// matrix-vector product and norm looks its tensor up here first, and a workgroup-memory load
// takes ~30 cycles where a storage load takes an L1 or L2 round trip.
var<workgroup> tab_sh: array<u32, TABLE_LEN>;

fn tab(i: u32) -> u32 {
    return tab_sh[i];
}

// The row sums of the matrix-vector products (ML lanes per row).
fn mv_sum4(lid: u32, v: vec4<f32>) -> vec4<f32> {
    return lanes_sum4(lid, v, ML);
}

fn lanes_sum(lid: u32, v: f32, width: u32) -> f32 {
    return lanes_sum4(lid, vec4<f32>(v, 0.0, 0.0, 0.0), width).x;
}

// y[out + r] = W[r] . input for r < n_rows, W the matrix at table entry `t` (format, first
// global row), k values per row. ML lanes per row; each slot of ML lanes takes RPI rows per
// pass (RPP apart), so every input unit it loads serves RPI weight rows and one reduction
// serves RPI rows: fewer passes and barriers per matrix.
// Grid mode: pass ps is workgroup (ps + off) % GRID's (`off` spreads consecutive matrices).
fn matvec(lid: u32, wid: u32, off: u32, t: u32, n_rows: u32, k: u32, src: u32, out: u32) {
    let fmt = tab(t);
    let row_base = tab(t + 1u);
    let lane = lid % ML;
    let units = k / 8u;
    let per_pass = RPP * RPI;
    let passes = npass(n_rows);
    let first = select(0u, (wid + GRID - off % GRID) % GRID, GRID_MODE);
    let stride = select(1u, GRID, GRID_MODE);
    for (var ps = first; ps < passes; ps += stride) {
        let r0 = ps * per_pass + lid / ML;
        var acc = vec4<f32>();
        for (var u = lane; u < units; u += ML) {
            let x = in8(src, u);
            for (var i = 0u; i < RPI; i++) {
                let r = min(r0 + i * RPP, n_rows - 1u);
                acc[i] += dot8(w8(fmt, row_base + r, u, k), x);
            }
        }
        let total = mv_sum4(lid, acc);
        if lane == 0u {
            for (var i = 0u; i < RPI; i++) {
                let r = r0 + i * RPP;
                if r < n_rows {
                    sset(out + r, total[i]);
                }
            }
        }
    }
}

fn npass(n_rows: u32) -> u32 {
    return (n_rows + RPP * RPI - 1u) / (RPP * RPI);
}

// vin = rms_norm(residual) * weight (f32 at arena word `norm`).
// vin = rms_norm(residual) * weight (f32 at arena word `norm`), after residual += s[src..]
// unless src is NONE: the residual add of the phase before, done here saves that phase its
// own barrier. The invocation's first weight is loaded before the reduction, so its round
// trip overlaps it. Each invocation rereads only the residual elements it wrote itself.
fn add_norm_to_vin(lid: u32, src: u32, norm: u32) {
    var w0 = 0.0;
    if lid < N_EMBD {
        w0 = arena_f32(norm + lid);
    }
    var ss = 0.0;
    for (var i = lid; i < N_EMBD; i += WG) {
        var x = res_get(i);
        if src != NONE {
            x += sget(src + i);
            res_set(i, x);
        }
        ss += x * x;
    }
    let scale = inverseSqrt(lanes_sum(lid, ss, WG) / f32(N_EMBD) + bitcast<f32>(EPS_BITS));
    for (var i = lid; i < N_EMBD; i += WG) {
        var w = w0;
        if i != lid {
            w = arena_f32(norm + i);
        }
        vin_set(i, res_get(i) * scale * w);
    }
    sync_res();
}

fn norm_to_vin(lid: u32, norm: u32) {
    add_norm_to_vin(lid, NONE, norm);
}

fn kv_base(l: u32, which: u32, kvh: u32) -> u32 {
    return ((l * 2u + which) * N_HEAD_KV + kvh) * N_CTX * HEAD_DIM;
}

// Element d of the rotated head at s[b..] (position c; d < HEAD_DIM).
fn rope_at(b: u32, d: u32, c: u32) -> f32 {
    let raw = sget(b + d);
    if d >= N_ROT {
        return raw;
    }
    var i0 = d & ~1u; // the pair's elements (x0 first) and its theta index
    var i1 = d | 1u;
    var pair = d / 2u;
    if NEOX {
        pair = d % (N_ROT / 2u);
        i0 = pair;
        i1 = pair + N_ROT / 2u;
    }
    let sc = sincos(rope_theta(c, pair, bitcast<f32>(THETA_SCALE_BITS)));
    let x0 = sget(b + i0);
    let x1 = sget(b + i1);
    return select(x0 * sc.x + x1 * sc.y, x0 * sc.y - x1 * sc.x, d == i0);
}

// Q, K (rotated) and V of position c from the raw projections at S_TMP: Q to S_Q, K and V to
// row c of layer l's cache and to kc_sh / vc_sh, from which this position's attention reads
// them. So the cache's row c is read only by later positions, after the step's closing
// storage barrier, and this phase needs none of its own.
fn rope_store(lid: u32, l: u32, c: u32) {
    for (var e = lid; e < N_Q + 2u * N_KV; e += WG) {
        if e >= N_Q + N_KV {
            let f = e - N_Q - N_KV;
            let v = sget(S_TMP + e);
            kv[kv_base(l, 1u, f / HEAD_DIM) + c * HEAD_DIM + f % HEAD_DIM] = v;
            vc_sh[f] = v;
            continue;
        }
        let f = select(e, e - N_Q, e >= N_Q);
        let d = f % HEAD_DIM;
        let v = rope_at(S_TMP + e - d, d, c); // the head starts at element e - d
        if e < N_Q {
            sset(S_Q + e, v);
        } else {
            kv[kv_base(l, 0u, f / HEAD_DIM) + c * HEAD_DIM + d] = v;
            kc_sh[f] = v;
        }
    }
    sync();
}

// Elements e..e+3 of the head's rotated query: from qh_sh with `own` (grid mode), else s[qb..].
fn head_q4(own: bool, qb: u32, e: u32) -> vec4<f32> {
    if own {
        return vec4<f32>(qh_sh[e], qh_sh[e + 1u], qh_sh[e + 2u], qh_sh[e + 3u]);
    }
    return sget4(qb + e);
}

// Attention of head h over positions 0..=c of layer l → S_ATT (normalised), on the ATT_G lanes
// of this invocation's head slot (lid / ATT_G), with scores at s[sc..]; `stores`: whether the
// slot's result is written (a slot past the last head repeats its work without storing it).
// Q from S_Q (with `own`, grid mode: from qh_sh), rows 0..c-1 from the cache and row c from
// kc_sh / vc_sh (the workgroup's own copy). Every invocation of the workgroup calls it.
fn attend_head(lid: u32, l: u32, c: u32, h: u32, stores: bool, own: bool, sc: u32) {
    let slot = lid / ATT_G;
    let li = lid % ATT_G;
    let kb = kv_base(l, 0u, h / GROUP);
    let vb = kv_base(l, 1u, h / GROUP);
    let cb = h / GROUP * HEAD_DIM; // the group's head in kc_sh / vc_sh
    let qb = S_Q + h * HEAD_DIM;
    var m = -3.0e38;
    for (var j = li; j <= c; j += ATT_G) {
        // Rows before c from the cache in a loop with no branch inside, so every load of the
        // row can issue before the first product; row c from the workgroup's copy.
        var d = 0.0;
        if j < c {
            let o = kb + j * HEAD_DIM;
            for (var e = 0u; e < HEAD_DIM; e += 4u) {
                let k = vec4<f32>(kv[o + e], kv[o + e + 1u], kv[o + e + 2u], kv[o + e + 3u]);
                d += dot(head_q4(own, qb, e), k);
            }
        } else {
            for (var e = 0u; e < HEAD_DIM; e += 4u) {
                let k = vec4<f32>(kc_sh[cb + e], kc_sh[cb + e + 1u], kc_sh[cb + e + 2u], kc_sh[cb + e + 3u]);
                d += dot(head_q4(own, qb, e), k);
            }
        }
        d *= bitcast<f32>(ATT_SCALE_BITS);
        sset(sc + j, d);
        m = max(m, d);
    }
    let mx = lanes_max(lid, m, ATT_G);
    var sum = 0.0;
    for (var j = li; j <= c; j += ATT_G) {
        let e = exp(sget(sc + j) - mx);
        sset(sc + j, e);
        sum += e;
    }
    let total = lanes_sum(lid, sum, ATT_G);
    sync();
    // Values: ATT_PARTS groups of HEAD_DIM lanes split the rows. Rows before c four at a
    // time, their loads issued together (the sum's order is the row order either way), then
    // the rest; row c from the workgroup's copy.
    let d = li % HEAD_DIM;
    var acc = 0.0;
    var j = li / HEAD_DIM;
    for (; j + 3u * ATT_PARTS < c; j += 4u * ATT_PARTS) {
        let o = vb + j * HEAD_DIM + d;
        let v0 = kv[o];
        let v1 = kv[o + ATT_PARTS * HEAD_DIM];
        let v2 = kv[o + 2u * ATT_PARTS * HEAD_DIM];
        let v3 = kv[o + 3u * ATT_PARTS * HEAD_DIM];
        acc += sget(sc + j) * v0;
        acc += sget(sc + j + ATT_PARTS) * v1;
        acc += sget(sc + j + 2u * ATT_PARTS) * v2;
        acc += sget(sc + j + 3u * ATT_PARTS) * v3;
    }
    for (; j <= c; j += ATT_PARTS) {
        var v: f32;
        if j == c {
            v = vc_sh[cb + d];
        } else {
            v = kv[vb + j * HEAD_DIM + d];
        }
        acc += sget(sc + j) * v;
    }
    key_z[lid] = acc; // the top-k keys are idle here: they hold the partial sums
    workgroupBarrier();
    if stores && li < HEAD_DIM {
        var o = 0.0;
        for (var i = 0u; i < ATT_PARTS; i++) {
            o += key_z[slot * ATT_G + i * HEAD_DIM + li];
        }
        sset(S_ATT + h * HEAD_DIM + li, o / total);
    }
    sync();
}

// Attention of every head over positions 0..=c of layer l → S_ATT (portable version), ATT_HP
// heads at a time on ATT_G lanes each (`att_heads`: as many as leave a head at least 32 lanes
// and head_dim), so a round of phases and barriers serves several heads; each head slot has
// its own row of scores (S_SC + slot × N_CTX).
fn attention(lid: u32, l: u32, c: u32) {
    let slot = lid / ATT_G;
    for (var hb = 0u; hb < N_HEAD; hb += ATT_HP) {
        let h = min(hb + slot, N_HEAD - 1u);
        attend_head(lid, l, c, h, hb + slot < N_HEAD, false, S_SC + slot * N_CTX);
    }
}

// residual += s[src..]
fn add_residual(lid: u32, src: u32) {
    for (var i = lid; i < N_EMBD; i += WG) {
        res_set(i, res_get(i) + sget(src + i));
    }
    sync_res();
}

fn layer(lid: u32, wid: u32, l: u32, c: u32) {
    if GRID_MODE {
        layer_grid(lid, wid, l, c);
        return;
    }
    let t = TABLE_LAYERS + l * TABLE_STRIDE;
    // The previous layer's down projection (at S_TMP) is added to the residual here.
    add_norm_to_vin(lid, select(S_TMP, NONE, l == 0u), tab(t + 14u));
    matvec(lid, wid, 0u, t, N_Q, N_EMBD, NONE, S_TMP);
    matvec(lid, wid, 0u, t + 2u, N_KV, N_EMBD, NONE, S_TMP + N_Q);
    matvec(lid, wid, 0u, t + 4u, N_KV, N_EMBD, NONE, S_TMP + N_Q + N_KV);
    sync();
    rope_store(lid, l, c);
    attention(lid, l, c);
    matvec(lid, wid, 0u, t + 6u, N_EMBD, N_Q, S_ATT, S_TMP);
    sync();
    add_norm_to_vin(lid, S_TMP, tab(t + 15u));
    matvec(lid, wid, 0u, t + 8u, N_FF, N_EMBD, NONE, S_GATE);
    matvec(lid, wid, 0u, t + 10u, N_FF, N_EMBD, NONE, S_UP);
    sync();
    matvec(lid, wid, 0u, t + 12u, N_EMBD, N_FF, S_GATE, S_TMP);
    sync();
    // residual += S_TMP is left to the next layer's norm, or the head's: a position that
    // chooses no token never needs the last layer's output.
}

fn embed(lid: u32, c: u32) {
    let id = tokens[c];
    let fmt = tab(0u);
    let row = tab(1u) + id;
    for (var u = lid; u < N_EMBD / 8u; u += WG) {
        let v = w8(fmt, row, u, N_EMBD);
        for (var j = 0u; j < 4u; j++) {
            res_set(8u * u + j, v.a[j]);
            res_set(8u * u + 4u + j, v.b[j]);
        }
    }
    sync_res();
}

fn load_list(list: u32, slot: u32, lid: u32) {
    if lid < BLOCK {
        var z = SENTINEL_Z;
        var id = NONE;
        if list < p.n_lists {
            let b = S_CAND + 2u * (list * BLOCK + lid);
            z = sget(b);
            id = sword(b + 1u);
        }
        key_z[slot * BLOCK + lid] = z;
        key_id[slot * BLOCK + lid] = id;
    }
}

// The head, penalties and the choice of token c + 1 (returned to invocation 0).
fn choose(lid: u32, wid: u32, c: u32) -> u32 {
    if GRID_MODE {
        return choose_grid(lid, wid, c);
    }
    add_norm_to_vin(lid, S_TMP, tab(4u)); // with the last layer's down projection
    matvec(lid, wid, 0u, 2u, N_VOCAB, N_EMBD, NONE, S_LOGITS);
    sync();
    let greedy = sampler.inv_temperature == 0.0;
    var bz = 0.0;
    var bi = NONE;
    let masks = constraint_mask_at();
    for (var i = lid; i < N_VOCAB; i += WG) {
        var v = sget(S_LOGITS + i);
        if sampler.penalties_on != 0u || p.ctab != 0u {
            v = penalize(v, masked_count(i, masks), sampler);
            sset(S_LOGITS + i, v);
        }
        if non_finite(v) {
            bz = NONFINITE_Z;
            bi = NONFINITE;
        } else if bi == NONE || better(v, i, bz, bi) {
            bz = v;
            bi = i;
        }
    }
    // Greedy: the best id; a non-finite logit anywhere makes it NONFINITE (commit ends there).
    let top = uniform_top(lid, wg_best(lid, bz, bi).y);
    if greedy || top == NONFINITE {
        return top;
    }
    return sample_logits(lid, c);
}

// Constrained generation (p.ctab != 0; the table is kernels::constraint's, copied into the
// scratch after the DFA state word). Every invocation reads the state after the step's
// closing gsync(); invocation 0 of workgroup 0 advances it right after `commit` (like
// `state`, item (d) of the synchronization argument).
fn ctab(i: u32) -> u32 {
    return s[p.ctab + 1u + i];
}

// Where the current state's mask words begin in the scratch (0 when unconstrained).
fn constraint_mask_at() -> u32 {
    if p.ctab == 0u {
        return 0u;
    }
    let mask = ctab(ctab(T_MASK_OF_STATE) + s[p.ctab]);
    return p.ctab + 1u + ctab(T_MASKS) + mask * ((N_VOCAB + 31u) / 32u);
}

// counts[id] with MASKED_BIT set when the constraint disallows id (`penalize` then gives it
// MASKED_LOGIT, as constraint_mask.wgsl's marks do on the fused path).
fn masked_count(id: u32, masks: u32) -> u32 {
    let c = counts[id] & ~MASKED_BIT;
    if masks == 0u || ((s[masks + id / 32u] >> (id % 32u)) & 1u) != 0u {
        return c;
    }
    return c | MASKED_BIT;
}

// The DFA state after the bytes of the committed `id` (sample_choose.wgsl's
// `advance_constraint`).
fn advance_constraint(id: u32) {
    if p.ctab == 0u || id == NONE || id == NONFINITE {
        return;
    }
    let n_classes = ctab(1u);
    let starts = ctab(T_TOKEN_STARTS);
    let bytes = ctab(T_TOKEN_BYTES);
    var st = s[p.ctab];
    // The bound in a `let`: the loop prover (src/gpu/loop_proof.rs) accepts no call in a test.
    let end = ctab(starts + id + 1u);
    for (var k = ctab(starts + id); k < end; k++) {
        let b = (ctab(bytes + k / 4u) >> ((k % 4u) * 8u)) & 0xffu;
        st = ctab(ctab(T_TRANS) + st * n_classes + ctab(ctab(T_CLASSES) + b));
    }
    s[p.ctab] = st;
}

var<workgroup> top_sh: u32;

// `top` (the same in every invocation: a workgroup reduction's result) as a value the
// uniformity analysis knows is uniform, so a branch on it may precede barriers (Tint checks).
fn uniform_top(lid: u32, top: u32) -> u32 {
    if lid == 0u {
        top_sh = top;
    }
    return workgroupUniformLoad(&top_sh);
}

// Sampling from the (penalised) logits at S_LOGITS: the choice of token c + 1, returned to
// invocation 0.
fn sample_logits(lid: u32, c: u32) -> u32 {
    var id = NONE;
    sync();
    // Stage 1 (sample_select.wgsl's work, slice by slice): each slice's best 128.
    let inv_t = sampler.inv_temperature;
    for (var sl = 0u; sl < p.n_lists; sl++) {
        for (var i = lid; i < KEYS; i += WG) {
            let tid = sl * KEYS + i;
            var z = SENTINEL_Z;
            var kid = NONE;
            if tid < N_VOCAB {
                let v = sget(S_LOGITS + tid) * inv_t;
                if v == v {
                    z = v;
                    kid = tid;
                }
            }
            key_z[i] = z;
            key_id[i] = kid;
        }
        workgroupBarrier();
        sort_blocks(lid);
        merge_tree(lid);
        if lid < BLOCK {
            let b = S_CAND + 2u * (sl * BLOCK + lid);
            sset(b, key_z[lid]);
            sword_set(b + 1u, key_id[lid]);
        }
        workgroupBarrier();
    }
    sync();
    // Stage 2 (sample_choose.wgsl's merge): the overall best 128, then the draw.
    for (var sl = 0u; sl < SLOTS; sl++) {
        load_list(sl, sl, lid);
    }
    workgroupBarrier();
    merge_tree(lid);
    for (var next = SLOTS; next < p.n_lists; next += SLOTS - 1u) {
        for (var sl = 1u; sl < SLOTS; sl++) {
            load_list(next + sl - 1u, sl, lid);
        }
        workgroupBarrier();
        merge_tree(lid);
    }
    fill_q(lid);
    if lid == 0u {
        id = draw(c + 1u);
    }
    return id;
}

// Whether every invocation still runs its loops in full. llvmpipe caps the loop back-edges of
// one invocation and, past the cap, leaves every loop at its next back-edge, so the rest of
// the position would compute garbage. A loop whose trip count the compiler cannot know
// detects it; any invocation's failure is seen by all (uniform result).
fn loops_intact(lid: u32) -> bool {
    var k = 0u;
    for (var i = 0u; i <= p.n_lists; i++) {
        k += 1u;
    }
    if k != p.n_lists + 1u {
        cut_sh = 1u;
    }
    return workgroupUniformLoad(&cut_sh) == 0u;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let wid = wg.x;
    if GRID_MODE && p.steps == 0u {
        if lid == 0u {
            discover();
        }
        return;
    }
    for (var i = lid; i < TABLE_LEN; i += WG) {
        tab_sh[i] = arena[i];
    }
    if lid == 0u {
        flag_sh = select(state.pos, NONE, state.done != 0u);
    }
    var c = workgroupUniformLoad(&flag_sh); // also orders the table's copy before its reads
    if c == NONE {
        return;
    }
    // At most PROMPT_POSITIONS prompt positions before this dispatch's tokens: a long prompt
    // takes several dispatches, and the host asks whether to go on between them (abort).
    let stop = min(p.end, min(max(c, p.n_prompt - 1u), c + PROMPT_POSITIONS) + p.steps);
    for (; c < stop; c++) {
        if lid == 0u {
            cut_sh = 0u; // visible to all after embed's sync()
        }
        embed(lid, c);
        for (var l = 0u; l < N_LAYER; l++) {
            layer(lid, wid, l, c);
        }
        let chooses = c + 1u >= p.n_prompt;
        var id = NONE;
        if chooses {
            id = choose(lid, wid, c);
        }
        // Nothing of position c is committed unless it was computed in full; the next
        // dispatch redoes it (its K/V rows are rewritten). In grid mode every workgroup's
        // verdict (and any barrier timeout) is in the error flags after one more barrier.
        let intact = loops_intact(lid);
        var err = 0u;
        if GRID_MODE {
            if !intact && lid == 0u {
                atomicOr(&grid_sync[1], G_CUT);
            }
            gsync(lid);
            err = grid_error(lid);
        } else if !intact {
            err = G_CUT;
        }
        if err != 0u {
            if lid == 0u && wid == 0u {
                // tells the host why this dispatch stopped short: 1 loop cap, 2 grid timeout
                state.aux = select(1u, 2u, (err & G_TIMEOUT) != 0u);
            }
            break;
        }
        if lid == 0u && wid == 0u {
            if chooses {
                commit(id, N_CTX); // state.pos == c, state.n_tokens == 1: token c + 1
                advance_constraint(id);
            } else {
                state.pos = c + 1u;
            }
        }
        gsync(lid);
        if lid == 0u {
            flag_sh = state.done;
        }
        if workgroupUniformLoad(&flag_sh) != 0u {
            break;
        }
    }
}
