// Decode matrix-vector product: y[row0 + r] = sum_c W[r][c] * x[c], f32 accumulation.
//
// One workgroup of 256 handles ROWS = 8 output rows; the 32 lanes of a row stride over it in
// units of 8 values (decoded by the prepended weight format's `w_load8`, so quantized weights
// are read as-is) and meet in a shared-memory tree reduction. A row is only k = n_embd or n_ff
// values, so one thread per row would stream each row serially and leave the GPU idle; many
// rows in flight is what fills the memory bus at batch 1. Eight rows per workgroup instead of
// one cuts the workgroup count (and its fixed cost, large on CPU adapters) eightfold.
// Workgroups beyond maxComputeWorkgroupsPerDimension fold into a 2D grid. A weight split
// into row-chunks is one dispatch per chunk (`row0`).

struct Params {
    k: u32,      // values per row (input length)
    n_rows: u32, // rows in this weight chunk
    row0: u32,   // index in y of this chunk's first row
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;       // [n_rows, k] in the format's GPU layout
@group(0) @binding(2) var<storage, read> x: array<f32>;       // [k]
@group(0) @binding(3) var<storage, read_write> y: array<f32>; // [n]

const WG: u32 = 256u;
const LANES: u32 = 32u;
const ROWS: u32 = WG / LANES; // must match kernels::matvec::ROWS_PER_WORKGROUP
var<workgroup> red: array<f32, WG>;

fn x_f32(i: u32) -> f32 {
    return select(0.0, x[i], i < p.k);
}

fn x_load8(u: u32) -> W8 {
    let i = 8u * u;
    return W8(
        vec4<f32>(x_f32(i), x_f32(i + 1u), x_f32(i + 2u), x_f32(i + 3u)),
        vec4<f32>(x_f32(i + 4u), x_f32(i + 5u), x_f32(i + 6u), x_f32(i + 7u)),
    );
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let lane = lid % LANES;
    let row = linear_group(wg, nwg) * ROWS + lid / LANES;
    let units = (p.k + 7u) / 8u;
    var acc = 0.0;
    if row < p.n_rows {
        for (var u = lane; u < units; u += LANES) {
            acc += dot8(w_load8(row, u, p.k), x_load8(u));
        }
    }
    red[lid] = acc;
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lane < s {
            red[lid] += red[lid + s];
        }
    }
    if lane == 0u && row < p.n_rows {
        y[p.row0 + row] = red[lid];
    }
}
