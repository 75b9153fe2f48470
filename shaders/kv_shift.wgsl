// Context shift: drops the KV rows [keep, keep + drop) of one layer's K or V cache, moving rows
// [keep + drop, n) down to [keep, n - drop), and for K re-rotates each moved row to its new
// position (llama.cpp's context shift, "K shift"). The rotation undoes the row's RoPE at its old
// position p and applies it at p - drop with the very angles rope.wgsl and fused_qkv.wgsl use
// (rope_math.wgsl), so a shifted key is the key a fresh evaluation would rotate at that
// position, to f32 rounding (mscale, applied once when the row was written, is kept as is).
//
// One dispatch moves one wave of rows: sources [first, first + rows) go `drop` rows down. A
// wave is at most `drop` rows long, so its sources and destinations never overlap and every
// row is its own workgroup (x: the row, y: the KV head); the waves of a shift run in order
// (the next wave's destinations are this one's sources).

struct Params {
    head_dim: u32,
    n_rot: u32,        // rotated dims per head; 0: no rotation (V, or K without RoPE)
    drop: u32,
    first: u32,        // this wave's first source row
    rows: u32,         // this wave's rows (at most `drop`)
    base: u32,         // element offset of head 0 in `cache`
    head_stride: u32,  // elements from one head to the next (n_ctx * head_dim)
    neox: u32,
    theta_scale: f32,
    freq_scale: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> cache: array<kv_t>;
@group(0) @binding(2) var<storage, read> factors: array<f32>; // [n_rot / 2]

const WG: u32 = 64u;
const MAX_HD: u32 = 512u;
var<workgroup> row: array<f32, MAX_HD>;

// Element j of a row stored rotated at position `old_pos`, rotated at `new_pos` instead.
fn moved(j: u32, old_pos: u32, new_pos: u32) -> f32 {
    let half = p.n_rot / 2u;
    if j >= p.n_rot {
        return row[j];
    }
    var i = j / 2u;
    var j0 = 2u * i;
    if p.neox != 0u {
        i = j % half;
        j0 = i;
    }
    let j1 = select(j0 + 1u, j0 + half, p.neox != 0u);
    let x0 = row[j0];
    let x1 = row[j1];
    // Undo the rotation at old_pos, then rotate at new_pos (mscale 1: it was applied once).
    let a = rope_sincos(rope_theta(old_pos, i, p.theta_scale), factors[i], p.freq_scale, 1.0);
    let y0 = x0 * a.y + x1 * a.x;
    let y1 = x1 * a.y - x0 * a.x;
    let b = rope_sincos(rope_theta(new_pos, i, p.theta_scale), factors[i], p.freq_scale, 1.0);
    if j == j0 {
        return y0 * b.y - y1 * b.x;
    }
    return y0 * b.x + y1 * b.y;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    if wg.x >= p.rows {
        return;
    }
    let head = p.base + wg.y * p.head_stride;
    let r = p.first + wg.x;
    let src = head + r * p.head_dim;
    for (var j = lid; j < p.head_dim; j += WG) {
        row[j] = f32(cache[src + j]);
    }
    workgroupBarrier();
    let new_pos = r - p.drop;
    let dst = head + new_pos * p.head_dim;
    for (var j = lid; j < p.head_dim; j += WG) {
        cache[dst + j] = kv_t(moved(j, r, new_pos));
    }
}
