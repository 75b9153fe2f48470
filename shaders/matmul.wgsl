// Prefill matrix product: Y[t][row0 + r] = sum_c W[r][c] * X[t][c] for t < state.n_tokens.
//
// A tiled GEMM. A workgroup of 256 computes a tile of ROWS = 32 weight rows x TOKENS = 32
// tokens, stepping over k in slabs of SLAB = 64 values:
//   1. every invocation decodes one 8-value weight unit (w_decode) of the slab and loads two
//      4-value quads of X, and stores them to workgroup memory: each weight unit is decoded
//      once per workgroup instead of once per token;
//   2. barrier; each invocation accumulates a 2 x 2 register tile (rows i, i + 16 x tokens
//      j, j + 16) from workgroup memory, four k at a time (vec4 fma), while the raw words of
//      the next slab are already in flight (software pipelining: fetched into registers
//      after the barrier, decoded and stored after the compute);
//   3. barrier, next slab.
// Why 32 x 32 tiles and a 2 x 2 register tile (rather than 4 x 4 on fewer invocations or
// bigger tiles): prefill shapes are skinny. SmolLM2's 576-row projections at 128 tokens make only
// 18 x 4 = 72 workgroups, fewer than an H100 has SMs, so time is set by one workgroup's latency;
// 256 invocations (8 warps) per workgroup split its arithmetic eight ways and hide its latency.
//
// Workgroup memory: W and X slabs, [32 rows or tokens][16 quads] of vec4 each, 2 x 8 KiB =
// 16 KiB (the WebGPU default limit). Quad q of row r sits at r * 16 + (q ^ (r & 7)): this XOR
// swizzle makes the unit stores (8 lanes = 8 rows, same quad), the X stores (8 lanes = 8 quads
// of a token) and the W reads (8 lanes = 8 rows, same quad) touch 8 distinct 16-byte bank
// groups, without padding that would not fit in 16 KiB; the X reads of 8 lanes share one
// address (a broadcast).
//
// Ragged shapes: units past k, rows past n_rows and tokens past state.n_tokens are stored as
// zeros and never written out, so a partial last slab (k % 64 != 0: 32 for block formats, any
// remainder for F32/F16) adds nothing; invocations whose tokens are all past state.n_tokens skip
// the arithmetic (a 5-token prompt's tile does ~5/16 of a full one's, the same values). Grid:
// x/y = row tiles (folded 2D, `linear_group`), z = token tiles; the grid may cover more tokens
// than state.n_tokens (whole workgroups past it return at once).

const WG: u32 = 256u;
const ROWS: u32 = 32u;   // must match kernels::matmul::ROWS_PER_WORKGROUP
const TOKENS: u32 = 32u; // must match kernels::matmul::TOKENS_PER_WORKGROUP
const SLAB: u32 = 64u;   // k values per step
const QUADS: u32 = 16u;  // SLAB / 4
const HALF: u32 = 16u;   // second row / token of an invocation's 2 x 2 tile

var<workgroup> w_sh: array<vec4<f32>, 512>; // [ROWS, QUADS], swizzled
var<workgroup> x_sh: array<vec4<f32>, 512>; // [TOKENS, QUADS], swizzled

// Index of quad q of row (or token) r in w_sh / x_sh.
fn slot(r: u32, q: u32) -> u32 {
    return r * QUADS + (q ^ (r & 7u));
}

fn hsum(v: vec4<f32>) -> f32 {
    return (v.x + v.y) + (v.z + v.w);
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

    // Loader role: weight unit (row lr, unit lu of the slab) and X quads (token lt and
    // lt + 16, quad lq).
    let lr = lid % ROWS;
    let lu = lid / ROWS;
    let w_row = r0 + lr;
    let w_ok = w_row < p.n_rows;
    let lq = lid % QUADS;
    let lt = lid / QUADS;
    // Compute role: rows ci, ci + 16 and tokens cj, cj + 16 of the tile.
    let ci = lid % HALF;
    let cj = lid / HALF;
    let wi = ci * QUADS;
    let wsw = ci & 7u;
    let xi = cj * QUADS;
    let xsw = cj & 7u;
    let live = t0 + cj < n_tokens; // token cj (and so cj + 16) inside the step

    // Slab 0's raw words.
    var w_raw = vec4<u32>();
    if w_ok && lu < units {
        w_raw = w_fetch(w_row, lu, p.k);
    }
    var xa = x_quad(t0 + lt, 4u * lq, n_tokens);
    var xb = x_quad(t0 + lt + HALF, 4u * lq, n_tokens);

    var acc00 = vec4<f32>(); // row ci,      token cj
    var acc01 = vec4<f32>(); // row ci,      token cj + 16
    var acc10 = vec4<f32>(); // row ci + 16, token cj
    var acc11 = vec4<f32>(); // row ci + 16, token cj + 16
    for (var s = 0u; s < slabs; s++) {
        let u = s * (SLAB / 8u) + lu;
        var wv = W8(vec4<f32>(), vec4<f32>());
        if w_ok && u < units {
            wv = w_decode(w_raw, w_row, u, p.k);
        }
        w_sh[slot(lr, 2u * lu)] = wv.a;
        w_sh[slot(lr, 2u * lu + 1u)] = wv.b;
        x_sh[slot(lt, lq)] = xa;
        x_sh[slot(lt + HALF, lq)] = xb;
        workgroupBarrier();

        // Next slab's loads, in flight during this slab's arithmetic.
        if s + 1u < slabs {
            let un = u + SLAB / 8u;
            if w_ok && un < units {
                w_raw = w_fetch(w_row, un, p.k);
            }
            let c = (s + 1u) * SLAB + 4u * lq;
            xa = x_quad(t0 + lt, c, n_tokens);
            xb = x_quad(t0 + lt + HALF, c, n_tokens);
        }

        // Invocations whose tokens are all past the step compute nothing (their X is zero and
        // never written out): a short prompt's tile costs its live tokens, not 32. A branch
        // around a loop of constant trip count: with the bound `select(0u, QUADS, live)`
        // instead, 1,024-token prefill was 2-5% slower on the H200 (SmolLM2, Gemma 3 270M;
        // bench/results/prefill-dead-tokens-h200-2026-11-29-6a693f7).
        if live {
            for (var q = 0u; q < QUADS; q++) {
                let w0 = w_sh[wi + (q ^ wsw)];
                let w1 = w_sh[wi + HALF * QUADS + (q ^ wsw)];
                let x0 = x_sh[xi + (q ^ xsw)];
                let x1 = x_sh[xi + HALF * QUADS + (q ^ xsw)];
                acc00 = fma(w0, x0, acc00);
                acc01 = fma(w0, x1, acc01);
                acc10 = fma(w1, x0, acc10);
                acc11 = fma(w1, x1, acc11);
            }
        }
        workgroupBarrier();
    }

    let ra = r0 + ci;
    let rb = ra + HALF;
    let ta = t0 + cj;
    let tb = ta + HALF;
    if ra < p.n_rows {
        if ta < n_tokens {
            y[ta * p.n + p.row0 + ra] = hsum(acc00);
        }
        if tb < n_tokens {
            y[tb * p.n + p.row0 + ra] = hsum(acc01);
        }
    }
    if rb < p.n_rows {
        if ta < n_tokens {
            y[ta * p.n + p.row0 + rb] = hsum(acc10);
        }
        if tb < n_tokens {
            y[tb * p.n + p.row0 + rb] = hsum(acc11);
        }
    }
}
