// Prefill matrix product: Y[t][row0 + r] = sum_c W[r][c] * X[t][c] for t < state.n_tokens.
//
// Same shape as matvec.wgsl (a workgroup of 256 serves ROWS = 8 weight rows, 32 lanes per row
// striding over it in units of 8, tree reduction) but each workgroup also serves TOKENS
// tokens: every weight unit is decoded once and dotted with TOKENS activation rows, so
// quantized weights are read and dequantized TOKENS times less often than running matvec per
// token. Grid: x/y = row groups (folded 2D), z = token tiles. The token count comes from
// `state`.

struct Params {
    k: u32,      // values per row (input length)
    n_rows: u32, // rows in this weight chunk
    row0: u32,   // column in Y of this chunk's first row
    n: u32,      // row stride of Y (all rows of the weight)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> w: array<u32>;       // [n_rows, k] in the format's GPU layout
@group(0) @binding(3) var<storage, read> x: array<f32>;       // [n_tokens, k]
@group(0) @binding(4) var<storage, read_write> y: array<f32>; // [n_tokens, n]

const WG: u32 = 256u;
const LANES: u32 = 32u;
const ROWS: u32 = WG / LANES; // must match kernels::matmul::ROWS_PER_WORKGROUP
const TOKENS: u32 = 8u;
var<workgroup> red: array<f32, 2048>; // [TOKENS, WG]

fn x_f32(base: u32, c: u32) -> f32 {
    return select(0.0, x[base + c], c < p.k);
}

fn x_load8(t: u32, u: u32) -> W8 {
    let b = t * p.k;
    let c = 8u * u;
    return W8(
        vec4<f32>(x_f32(b, c), x_f32(b, c + 1u), x_f32(b, c + 2u), x_f32(b, c + 3u)),
        vec4<f32>(x_f32(b, c + 4u), x_f32(b, c + 5u), x_f32(b, c + 6u), x_f32(b, c + 7u)),
    );
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let lane = lid % LANES;
    let row_base = lid - lane; // this row's first slot in `red`
    let row = (wg.x + wg.y * nwg.x) * ROWS + lid / LANES;
    let t0 = wg.z * TOKENS;
    let nt = min(TOKENS, max(state.n_tokens, t0) - t0);
    let units = (p.k + 7u) / 8u;
    var acc = array<f32, TOKENS>();
    if row < p.n_rows {
        for (var u = lane; u < units; u += LANES) {
            let wv = w_load8(row, u, p.k);
            for (var j = 0u; j < nt; j++) {
                acc[j] += dot8(wv, x_load8(t0 + j, u));
            }
        }
    }
    for (var j = 0u; j < TOKENS; j++) {
        red[j * WG + lid] = acc[j];
    }
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lane < s {
            for (var j = 0u; j < TOKENS; j++) {
                red[j * WG + lid] += red[j * WG + lid + s];
            }
        }
    }
    workgroupBarrier();
    if lane < nt && row < p.n_rows {
        y[(t0 + lane) * p.n + p.row0 + row] = red[lane * WG + row_base];
    }
}
