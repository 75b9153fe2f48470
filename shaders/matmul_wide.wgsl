// Prefill matrix product for long batches: Y[t][row0 + r] = sum_c W[r][c] * X[t][c] for
// t < state.n_tokens. The same product as matmul.wgsl, with a tile shaped for many tokens.
//
// A workgroup of 256 computes ROWS = 64 weight rows x TOKENS = 64 tokens, stepping over k in
// slabs of SLAB = 32 values:
//   1. every invocation decodes one 8-value weight unit (row lid % 64, unit lid / 64 of the
//      slab) and loads 8 values of X (token lid % 64, values 8 (lid / 64) ..), and stores both
//      k-major ([k][row], [k][token]) in workgroup memory; consecutive invocations store
//      consecutive words, so the stores are free of bank conflicts;
//   2. barrier; each invocation accumulates a 4 x 4 register tile (rows 4 (lid % 16) .. + 4 x
//      tokens 4 (lid / 16) .. + 4) as outer products, one vec4 of weights and one of X per k:
//      16 FMAs per two workgroup loads (matmul.wgsl's 2 x 2 tile does 16 per four), the
//      weights' vec4s of a warp contiguous and its X vec4s shared (a broadcast); the next
//      slab's raw weight words and X values are already in flight;
//   3. barrier, next slab.
// matmul.wgsl stays the kernel for products with few such tiles (kernels::matmul::
// WIDE_FROM_GROUPS): at 128 tokens a 64 x 64 tile leaves most of a large GPU idle (SmolLM2's
// 576-row projections: 18 workgroups).
//
// Workgroup memory: 2 x [32][64] f32 = 16 KiB (the WebGPU default limit).
//
// Ragged shapes: units past k, rows past n_rows and tokens past state.n_tokens are stored as
// zeros and never written out. Grid: x/y = row tiles (folded 2D, `linear_group`), z = token
// tiles; whole workgroups past state.n_tokens return at once, and invocations whose tokens are
// all past it skip the arithmetic.

const WG: u32 = 256u;
const ROWS: u32 = 64u;   // must match kernels::matmul::WIDE_ROWS
const TOKENS: u32 = 64u; // must match kernels::matmul::WIDE_TOKENS
const SLAB: u32 = 32u;   // k values per step
const UNITS: u32 = 4u;   // SLAB / 8

var<workgroup> w_sh: array<vec4<f32>, 512>; // [SLAB][ROWS / 4]
var<workgroup> x_sh: array<vec4<f32>, 512>; // [SLAB][TOKENS / 4]

// X[t][c .. c + 8] as two vec4s, zero past k and for tokens past n_tokens.
fn x_eight(t: u32, c: u32, n_tokens: u32) -> array<vec4<f32>, 2> {
    var v = array<vec4<f32>, 2>();
    if t < n_tokens {
        let b = t * p.k + c;
        if c + 8u <= p.k {
            v[0] = vec4<f32>(x[b], x[b + 1u], x[b + 2u], x[b + 3u]);
            v[1] = vec4<f32>(x[b + 4u], x[b + 5u], x[b + 6u], x[b + 7u]);
        } else {
            for (var e = 0u; e < 8u; e++) {
                if c + e < p.k {
                    v[e / 4u][e % 4u] = x[b + e];
                }
            }
        }
    }
    return v;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let n_tokens = state.n_tokens;
    let r0 = linear_group(wg, nwg) * ROWS; // first row of this tile (in the chunk)
    let t0 = wg.z * TOKENS;                // first token of this tile
    if r0 >= p.n_rows || t0 >= n_tokens {
        return; // whole workgroup: the folded grid's spare groups, tokens past the step
    }
    let units = (p.k + 7u) / 8u;
    let slabs = (p.k + SLAB - 1u) / SLAB;

    // Loader role: weight unit lu of row lr; X values 8 lu .. of token lr.
    let lr = lid % ROWS;
    let lu = lid / ROWS;
    let w_row = r0 + lr;
    let w_ok = w_row < p.n_rows;
    let x_tok = t0 + lr;
    // Compute role: rows 4 ci .. + 4, tokens 4 cj .. + 4 of the tile.
    let ci = lid % 16u;
    let cj = lid / 16u;
    let live = t0 + 4u * cj < n_tokens; // the first of tokens 4 cj .. + 4 inside the step

    var w_raw = vec4<u32>();
    if w_ok && lu < units {
        w_raw = w_fetch(w_row, lu, p.k);
    }
    var xv = x_eight(x_tok, 8u * lu, n_tokens);

    var acc = array<vec4<f32>, 4>(); // [token j] -> rows 4 ci .. + 4
    for (var s = 0u; s < slabs; s++) {
        let u = s * UNITS + lu;
        var wv = W8(vec4<f32>(), vec4<f32>());
        if w_ok && u < units {
            wv = w_decode(w_raw, w_row, u, p.k);
        }
        let kb = 8u * lu; // this invocation's first k of the slab
        let q = lr / 4u;
        let e = lr % 4u;
        for (var i = 0u; i < 4u; i++) {
            w_sh[(kb + i) * 16u + q][e] = wv.a[i];
            w_sh[(kb + 4u + i) * 16u + q][e] = wv.b[i];
            x_sh[(kb + i) * 16u + q][e] = xv[0][i];
            x_sh[(kb + 4u + i) * 16u + q][e] = xv[1][i];
        }
        workgroupBarrier();

        // Next slab's loads, in flight during this slab's arithmetic.
        if s + 1u < slabs {
            let un = u + UNITS;
            if w_ok && un < units {
                w_raw = w_fetch(w_row, un, p.k);
            }
            xv = x_eight(x_tok, (s + 1u) * SLAB + 8u * lu, n_tokens);
        }

        // Invocations whose four tokens are past the step compute nothing (see matmul.wgsl:
        // a branch around a loop of constant trip count).
        if live {
            for (var kk = 0u; kk < SLAB; kk++) {
                let a = w_sh[kk * 16u + ci];
                let b = x_sh[kk * 16u + cj];
                acc[0] = fma(a, vec4<f32>(b.x), acc[0]);
                acc[1] = fma(a, vec4<f32>(b.y), acc[1]);
                acc[2] = fma(a, vec4<f32>(b.z), acc[2]);
                acc[3] = fma(a, vec4<f32>(b.w), acc[3]);
            }
        }
        workgroupBarrier();
    }

    let ra = r0 + 4u * ci;
    for (var j = 0u; j < 4u; j++) {
        let t = t0 + 4u * cj + j;
        if t < n_tokens {
            let base = t * p.n + p.row0 + ra;
            for (var i = 0u; i < 4u; i++) {
                if ra + i < p.n_rows {
                    y[base + i] = acc[j][i];
                }
            }
        }
    }
}
