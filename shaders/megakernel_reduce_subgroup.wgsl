// The megakernel's workgroup reductions, subgroup version: chosen (by `kernels::megakernel`)
// only when the adapter's subgroups are exactly 32 invocations wide, so 32 consecutive
// invocations of the 256-invocation workgroup are one subgroup. Groups narrower than a
// subgroup reduce by butterfly shuffles (no barrier); the whole workgroup by a subgroup
// operation, then across the 8 subgroups through one barrier, where the tree of
// megakernel_reduce_shared.wgsl takes eight levels. Sums round differently from the tree's;
// the maximum and the best candidate are the same. Every function must be called in uniform
// control flow by the whole workgroup.

var<workgroup> red4: array<vec4<f32>, 8>; // one partial per subgroup
var<workgroup> red_u: array<u32, 8>;

// Sums over aligned groups of `width` invocations (a power of two <= WG); every invocation
// of the group gets its group's.
fn lanes_sum4(lid: u32, v: vec4<f32>, width: u32) -> vec4<f32> {
    if width == 32u {
        return subgroupAdd(v);
    }
    if width < 32u {
        var s = v;
        for (var m = width / 2u; m > 0u; m >>= 1u) {
            s += subgroupShuffleXor(s, m);
        }
        return s;
    }
    let s = subgroupAdd(v);
    if lid % 32u == 0u {
        red4[lid / 32u] = s;
    }
    workgroupBarrier();
    let first = (lid / width) * (width / 32u);
    var r = red4[first];
    for (var i = 1u; i < width / 32u; i++) {
        r += red4[first + i];
    }
    workgroupBarrier();
    return r;
}

// Maxima over aligned groups of `width` invocations (a power of two <= WG); every invocation
// of the group gets its group's.
fn lanes_max(lid: u32, v: f32, width: u32) -> f32 {
    if width == 32u {
        return subgroupMax(v);
    }
    if width < 32u {
        var m = v;
        for (var k = width / 2u; k > 0u; k >>= 1u) {
            m = max(m, subgroupShuffleXor(m, k));
        }
        return m;
    }
    let m = subgroupMax(v);
    if lid % 32u == 0u {
        red4[lid / 32u].x = m;
    }
    workgroupBarrier();
    let first = (lid / width) * (width / 32u);
    var r = red4[first].x;
    for (var i = 1u; i < width / 32u; i++) {
        r = max(r, red4[first + i].x);
    }
    workgroupBarrier();
    return r;
}

// The best (value, id) over the workgroup (`better`: highest value, lowest id on ties; NaN
// and NONE never win), as (f32 bits, id), to every invocation.
fn wg_best(lid: u32, z: f32, i: u32) -> vec2<u32> {
    var bz = z;
    var bi = i;
    for (var m = 16u; m > 0u; m >>= 1u) {
        let oz = subgroupShuffleXor(bz, m);
        let oi = subgroupShuffleXor(bi, m);
        if oi != NONE && (bi == NONE || better(oz, oi, bz, bi)) {
            bz = oz;
            bi = oi;
        }
    }
    if lid % 32u == 0u {
        red4[lid / 32u].x = bz;
        red_u[lid / 32u] = bi;
    }
    workgroupBarrier();
    bz = red4[0].x;
    bi = red_u[0];
    for (var k = 1u; k < WG / 32u; k++) {
        let oz = red4[k].x;
        let oi = red_u[k];
        if oi != NONE && (bi == NONE || better(oz, oi, bz, bi)) {
            bz = oz;
            bi = oi;
        }
    }
    workgroupBarrier();
    return vec2<u32>(bitcast<u32>(bz), bi);
}
