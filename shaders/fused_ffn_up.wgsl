// Fused decode, dispatch 3 of 4 per layer: attention combine + residual + RMS norm + gate/up
// projections + SwiGLU, one token.
//
//   x_mid = x + sum_{h, c} exp(m_{h,c} - M_h) / L_h * P[h, c]      (see fused_attention.wgsl;
//           with a single chunk P is already normalised and summed over each workgroup's
//           ATT_HG heads: x + sum_s P[s, 0], s < N_HEAD / ATT_HG)
//   g, u  = (W_gate[r] . (x_mid * norm_w)) * s,  (W_up[r] . (x_mid * norm_w)) * s
//   hidden[r] = act(g) * u,                       s = 1 / sqrt(mean(x_mid^2) + eps)
//
// Two pipelines are built from this file (`SINGLE_CHUNK`, prepended): one for steps whose
// context fits one attention chunk, with no merge code at all (sharing a kernel with it cost
// the single-chunk path 3 us per dispatch on an H200), and a general one; the host picks per
// recorded chunk of steps.
// Phase 1: every workgroup rebuilds x_mid from the attention partials (n_head * chunks rows of
// n_embd floats, or n_head / ATT_HG with one chunk, from cache) into workgroup memory, one vec4 of
// it per invocation. With several chunks per head, their merge weights are computed first, once per
// workgroup. Workgroup 0 also writes x_mid out for the residual of dispatch 4.
// Phase 2: RPASS passes of ROWS = 256 / LANES rows of gate and of up per workgroup, LANES lanes
// per row; as in fused_qkv.wgsl the norm's scale is applied after the dot products, and
// sum(x_mid^2) comes out of the same row reduction. The first pass's gate/up weights and
// norm_w are loaded before phase 1. RPASS (prepended; `kernels::fused_layer::ffn_up_passes`)
// is 1 unless phase 1 is large (many heads × a wide model): every workgroup repeats it, so
// more rows per workgroup divide its total L2 traffic. Each pass loads the next one's weights
// before its own arithmetic.
// MODE (prepended) splits phase 1 off where it is large (`kernels::fused_layer::ffn_up_precombine`,
// e.g. Phi-3-mini's 32 heads x 3072 = 384 KiB of partials per workgroup, read by each of
// hundreds of workgroups): MODE 1 is phase 1 alone, written to x_mid once by ceil(n_embd / 1024)
// workgroups of one vec4 per invocation; MODE 2 is phase 2, every workgroup loading x_mid. MODE
// 0 is both in one dispatch. MODE 1 and 2 never have POST_NORMS (its norm of o needs all of it
// in one workgroup).
// Architecture switches (see fused_qkv.wgsl): O_BIAS adds the output projection's bias to
// the attention output o. POST_NORMS (gemma3): x_mid = x + o * pa_w / sqrt(mean(o^2) + eps),
// where x itself is base + delta * pf_w / sqrt(mean(delta^2) + eps) (the previous layer's
// deferred post-FFN norm, when p.pf_off is not NONE); both scales come from one workgroup
// reduction in phase 1, which already holds all of o and delta. GELU picks GeGLU's gate.
// Vectors come from the arena `vecs` at offsets in `p` (floats).
// Shape constants are prepended (see fused_qkv.wgsl). When state.done is set the kernel
// returns at once.

struct Params {
    eps: f32,
    norm_off: u32, // FFN norm weights in `vecs`
    pa_off: u32,   // post-attention norm weights (POST_NORMS)
    pf_off: u32,   // the previous layer's post-FFN norm (POST_NORMS); NONE: x has no delta
    bo_off: u32,   // output-projection bias (O_BIAS)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> lp: array<Params, N_LAYER>; // one per layer
var<private> p: Params; // this layer's
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;         // [n_embd / 4] (+ delta)
@group(0) @binding(3) var<storage, read> part: array<vec4<f32>>;      // [n_head, max_chunks, PART_STRIDE / 4]
@group(0) @binding(4) var<storage, read> vecs: array<vec4<f32>>;      // the vector arena
@group(0) @binding(5) var<storage, read> wgate: array<u32>;           // W_gate [n_ff, n_embd]
@group(0) @binding(6) var<storage, read> wup: array<u32>;             // W_up   [n_ff, n_embd]
@group(0) @binding(7) var<storage, read_write> x_mid: array<vec4<f32>>; // [n_embd / 4]
@group(0) @binding(8) var<storage, read_write> hidden: array<f32>;    // [n_ff]

const WG: u32 = 256u;
const ROWS: u32 = WG / LANES;
const UNITS: u32 = N_EMBD / 8u;
const PER_LANE: u32 = (UNITS + LANES - 1u) / LANES;
const V4: u32 = N_EMBD / 4u;              // vec4s of x_mid
const V4_PER: u32 = (V4 + WG - 1u) / WG;  // per invocation in phase 1
const PSTRIDE4: u32 = PART_STRIDE / 4u;   // vec4s per partial row; (m, l) start at N_EMBD / 4

var<workgroup> xm_sh: array<vec4<f32>, V4>;
var<workgroup> wts: array<f32, N_HEAD * MAX_CHUNKS>; // kernels::fused_layer::MAX_HEAD_CHUNKS
var<workgroup> chunks_sh: u32;

// init + the attention output o[4i .. 4i + 4] for `n_chunks` chunks per head (init: x, or 0 when
// POST_NORMS norms o before the residual add). With one chunk (contexts up to ATT_CHUNK) the
// attention dispatch has already divided by l and summed each head group, so this is x + sum_s P:
// adds of independent loads. Otherwise the merge weights are in `wts` (computed once per workgroup
// by `merge_weights`) and each chunk's loads of every head are in flight together.
fn combine(i: u32, n_chunks: u32, init: vec4<f32>) -> vec4<f32> {
    if SINGLE_CHUNK || n_chunks == 1u {
        var acc = init;
        for (var s = 0u; s < N_HEAD / ATT_HG; s++) {
            acc += part[s * MAX_CHUNKS * PSTRIDE4 + i];
        }
        return acc;
    }
    var acc = init;
    for (var c = 0u; c < n_chunks; c++) {
        for (var h = 0u; h < N_HEAD; h++) {
            let b = h * MAX_CHUNKS + c;
            acc += wts[b] * part[b * PSTRIDE4 + i];
        }
    }
    return acc;
}

// init + o[4i .. 4i + 4], the output projection's bias included (O_BIAS).
fn attention_out(i: u32, n_chunks: u32, init: vec4<f32>) -> vec4<f32> {
    var v = combine(i, n_chunks, init);
    if O_BIAS {
        v += vecs[p.bo_off / 4u + i];
    }
    return v;
}

// wts[h, c] = exp(m_{h,c} - M_h) / L_h for every head and chunk, one head per invocation
// (N_HEAD * n_chunks exps per workgroup rather than per invocation). Call uniformly.
fn merge_weights(lid: u32, n_chunks: u32) {
    for (var h = lid; h < N_HEAD; h += WG) {
        let b = h * MAX_CHUNKS;
        var mx = -3.40282e38;
        for (var c = 0u; c < n_chunks; c++) {
            mx = max(mx, part[(b + c) * PSTRIDE4 + V4].x);
        }
        var total = 0.0;
        for (var c = 0u; c < n_chunks; c++) {
            let ml = part[(b + c) * PSTRIDE4 + V4];
            let f = exp(ml.x - mx);
            wts[b + c] = f;
            total += f * ml.y;
        }
        for (var c = 0u; c < n_chunks; c++) {
            wts[b + c] /= total;
        }
    }
    workgroupBarrier();
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
    if MODE == 1u {
        // Phase 1 alone: one vec4 of x_mid per invocation.
        if lid == 0u {
            chunks_sh = select(0u, (state.pos + ATT_CHUNK) / ATT_CHUNK, state.done == 0u);
        }
        let n_chunks = workgroupUniformLoad(&chunks_sh);
        if n_chunks == 0u {
            return;
        }
        if !SINGLE_CHUNK && n_chunks > 1u {
            merge_weights(lid, n_chunks);
        }
        let i = wg.x * WG + lid;
        if i < V4 {
            x_mid[i] = attention_out(i, n_chunks, x[i]);
        }
        return;
    }
    let lane = lid % LANES;
    let block0 = wg.x * RPASS;
    let row0 = min(block0 * ROWS + lid / LANES, N_FF - 1u);
    // Weights and norm_w first: their latency overlaps the state read and phase 1.
    var gr: array<vec4<u32>, PER_LANE>;
    var ur: array<vec4<u32>, PER_LANE>;
    var na: array<W8, PER_LANE>;
    for (var j = 0u; j < PER_LANE; j++) {
        let u = min(lane + j * LANES, UNITS - 1u);
        gr[j] = wgate_fetch(row0, u, N_EMBD);
        ur[j] = wup_fetch(row0, u, N_EMBD);
        na[j] = W8(vecs[p.norm_off / 4u + 2u * u], vecs[p.norm_off / 4u + 2u * u + 1u]);
    }
    if lid == 0u {
        chunks_sh = select(0u, (state.pos + ATT_CHUNK) / ATT_CHUNK, state.done == 0u);
    }
    let n_chunks = workgroupUniformLoad(&chunks_sh);
    if n_chunks == 0u {
        return;
    }

    // Phase 1: x_mid into workgroup memory.
    if MODE == 0u && !SINGLE_CHUNK && n_chunks > 1u {
        merge_weights(lid, n_chunks);
    }
    let first = wg.x == 0u;
    if MODE == 2u {
        for (var k = 0u; k < V4_PER; k++) {
            let i = lid + k * WG;
            if i < V4 {
                xm_sh[i] = x_mid[i];
            }
        }
    } else if POST_NORMS {
        let delta = p.pf_off != NONE; // uniform
        var ov: array<vec4<f32>, V4_PER>;
        var dv: array<vec4<f32>, V4_PER>;
        var sums = vec4<f32>(); // (sum o^2, sum delta^2)
        for (var k = 0u; k < V4_PER; k++) {
            let i = lid + k * WG;
            if i < V4 {
                ov[k] = attention_out(i, n_chunks, vec4<f32>());
                if delta {
                    dv[k] = x[V4 + i];
                }
                sums += vec4<f32>(dot(ov[k], ov[k]), dot(dv[k], dv[k]), 0.0, 0.0);
            }
        }
        let t = lanes_sum4(lid, sums, WG);
        let so = inverseSqrt(t.x / f32(N_EMBD) + p.eps);
        let sd = inverseSqrt(t.y / f32(N_EMBD) + p.eps);
        for (var k = 0u; k < V4_PER; k++) {
            let i = lid + k * WG;
            if i < V4 {
                var xv = x[i];
                if delta {
                    xv += dv[k] * sd * vecs[p.pf_off / 4u + i];
                }
                let v = xv + ov[k] * so * vecs[p.pa_off / 4u + i];
                xm_sh[i] = v;
                if first {
                    x_mid[i] = v;
                }
            }
        }
    } else {
        for (var k = 0u; k < V4_PER; k++) {
            let i = lid + k * WG;
            if i < V4 {
                let v = attention_out(i, n_chunks, x[i]);
                xm_sh[i] = v;
                if first {
                    x_mid[i] = v;
                }
            }
        }
    }
    workgroupBarrier();

    // Phase 2: gate/up rows, norm folded into the reduction; pass 0 uses the prefetched
    // weights, and each pass issues the next pass's loads before its own arithmetic and
    // reduction, so the passes wait on one memory round trip, not RPASS of them.
    // HOIST (single-chunk steps with several passes): what every pass shares is computed once,
    // this lane's units of x_mid scaled by norm_w and its share of sum(x_mid^2) (summed across
    // the row's lanes with each pass's dot products). Elsewhere each pass computes them: hoisted
    // in the general variant too, SmolLM2's gate/up at 1k context went 10.5 -> 14.1 us per
    // dispatch on an H200 (bench/NOTES.md, 2026-11-26).
    const HOIST: bool = (SINGLE_CHUNK || MODE == 2u) && RPASS > 1u;
    var xw: array<W8, PER_LANE>;
    var xs: array<f32, PER_LANE>;
    var ss = 0.0;
    if HOIST {
        for (var j = 0u; j < PER_LANE; j++) {
            let u = lane + j * LANES;
            if u < UNITS {
                let xv = W8(xm_sh[2u * u], xm_sh[2u * u + 1u]);
                xw[j] = W8(xv.a * na[j].a, xv.b * na[j].b);
                xs[j] = sum8(xw[j]);
                ss += dot8(xv, xv);
            }
        }
    }
    for (var k = 0u; k < RPASS; k++) {
        let out_row = (block0 + k) * ROWS + lid / LANES;
        let row = min(out_row, N_FF - 1u);
        var gn: array<vec4<u32>, PER_LANE>;
        var un: array<vec4<u32>, PER_LANE>;
        if k + 1u < RPASS {
            let next = min(out_row + ROWS, N_FF - 1u);
            for (var j = 0u; j < PER_LANE; j++) {
                let u = min(lane + j * LANES, UNITS - 1u);
                gn[j] = wgate_fetch(next, u, N_EMBD);
                un[j] = wup_fetch(next, u, N_EMBD);
            }
        }
        var acc = vec4<f32>(0.0, 0.0, ss, 0.0); // (gate dot, up dot, sum x_mid^2, 0)
        for (var j = 0u; j < PER_LANE; j++) {
            let u = lane + j * LANES;
            if u < UNITS {
                if HOIST {
                    acc.x += wgate_dot8(gr[j], row, u, N_EMBD, xw[j], xs[j]);
                    acc.y += wup_dot8(ur[j], row, u, N_EMBD, xw[j], xs[j]);
                } else {
                    let xv = W8(xm_sh[2u * u], xm_sh[2u * u + 1u]);
                    let xwj = W8(xv.a * na[j].a, xv.b * na[j].b);
                    let xsj = sum8(xwj);
                    acc += vec4<f32>(
                        wgate_dot8(gr[j], row, u, N_EMBD, xwj, xsj),
                        wup_dot8(ur[j], row, u, N_EMBD, xwj, xsj),
                        dot8(xv, xv),
                        0.0,
                    );
                }
            }
        }
        let t = row_sum4(lid, acc);
        if lane == 0u && out_row < N_FF {
            let s = inverseSqrt(t.z / f32(N_EMBD) + p.eps);
            let g = t.x * s;
            var a = silu(g);
            if GELU {
                a = gelu_tanh(g);
            }
            hidden[row] = a * (t.y * s);
        }
        gr = gn;
        ur = un;
    }
}
