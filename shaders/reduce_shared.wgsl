// Reductions of the fused kernels, workgroup-memory version (every adapter): trees over
// `red4` with a barrier per level. `reduce_subgroup.wgsl` defines the same functions with
// subgroup operations where subgroups are exactly 32 wide. Workgroups are 256 invocations,
// rows are LANES consecutive invocations (a kernel constant, 32..256); every function must be
// called in uniform control flow by the whole workgroup.

var<workgroup> red4: array<vec4<f32>, 256>;

// Sum over `width` consecutive aligned invocations (a power of two <= 256); every one gets it.
fn lanes_sum4(lid: u32, v: vec4<f32>, width: u32) -> vec4<f32> {
    red4[lid] = v;
    for (var s = width / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lid % width < s {
            red4[lid] += red4[lid + s];
        }
    }
    workgroupBarrier();
    let r = red4[lid - lid % width];
    workgroupBarrier();
    return r;
}

// Sum over the LANES lanes of `lid`'s row (invocations LANES r .. LANES r + LANES - 1);
// every lane gets it.
fn row_sum(lid: u32, v: f32) -> f32 {
    return lanes_sum4(lid, vec4<f32>(v, 0.0, 0.0, 0.0), LANES).x;
}

fn row_sum2(lid: u32, v: vec2<f32>) -> vec2<f32> {
    return lanes_sum4(lid, vec4<f32>(v, 0.0, 0.0), LANES).xy;
}

fn row_sum4(lid: u32, v: vec4<f32>) -> vec4<f32> {
    return lanes_sum4(lid, v, LANES);
}

// Sum over aligned groups of 8 lanes (invocations 8g .. 8g + 7); every lane gets it.
fn oct_sum(lid: u32, v: f32) -> f32 {
    return lanes_sum4(lid, vec4<f32>(v, 0.0, 0.0, 0.0), 8u).x;
}

// oct_sum of each component.
fn oct_sum4(lid: u32, v: vec4<f32>) -> vec4<f32> {
    return lanes_sum4(lid, v, 8u);
}

// Componentwise max over the whole workgroup of 256; every invocation gets it.
fn wg_max4(lid: u32, v: vec4<f32>) -> vec4<f32> {
    red4[lid] = v;
    for (var s = 128u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lid < s {
            red4[lid] = max(red4[lid], red4[lid + s]);
        }
    }
    workgroupBarrier();
    let r = red4[0];
    workgroupBarrier();
    return r;
}

var<workgroup> best_red: array<vec2<u32>, 256>;

// Whether candidate a = (f32 bits, id) beats b: larger value, lower id on ties; NONE loses.
fn beats(a: vec2<u32>, b: vec2<u32>) -> bool {
    let av = bitcast<f32>(a.x);
    let bv = bitcast<f32>(b.x);
    return a.y != 0xffffffffu && (b.y == 0xffffffffu || av > bv || (av == bv && a.y < b.y));
}

// The best (f32 bits, id) over the 32 invocations 32s .. 32s + 31 holding `lid`: the largest v (NaN and id NONE
// excluded), the lowest id on ties; (0, NONE) when no lane has a candidate.
fn row_best(lid: u32, v: f32, id: u32) -> vec2<u32> {
    best_red[lid] = select(vec2<u32>(0u, 0xffffffffu), vec2<u32>(bitcast<u32>(v), id), v == v);
    for (var s = 16u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lid % 32u < s && beats(best_red[lid + s], best_red[lid]) {
            best_red[lid] = best_red[lid + s];
        }
    }
    workgroupBarrier();
    let r = best_red[lid - lid % 32u];
    workgroupBarrier();
    return r;
}
