// Reductions of the fused kernels, subgroup version: chosen (by `kernels::fused_layer`) only
// when the adapter's subgroups are exactly 32 invocations wide (subgroup_min_size ==
// subgroup_max_size == 32: NVIDIA, Apple), so 32 consecutive invocations of a 256-invocation
// workgroup are one subgroup: a row of LANES lanes (a kernel constant, 32..256) sums within
// its subgroups and, when it spans several, through one barrier.
// `reduce_shared.wgsl` defines the same functions with workgroup memory for every adapter.
// Every function must be called in uniform control flow by the whole workgroup.

var<workgroup> sg_part4: array<vec4<f32>, 8>;

// Sum over aligned groups of `width` consecutive invocations (32, 64, 128 or 256: whole
// subgroups; the same for the whole workgroup); every invocation gets its group's sum. Within a
// subgroup by subgroupAdd, across subgroups through one barrier.
fn lanes_sum4(lid: u32, v: vec4<f32>, width: u32) -> vec4<f32> {
    let s = subgroupAdd(v);
    if width <= 32u {
        return s;
    }
    if lid % 32u == 0u {
        sg_part4[lid / 32u] = s;
    }
    workgroupBarrier();
    let first = (lid / width) * (width / 32u);
    var r = sg_part4[first];
    for (var i = 1u; i < width / 32u; i++) {
        r += sg_part4[first + i];
    }
    workgroupBarrier();
    return r;
}

// Sum over the LANES lanes of `lid`'s row (invocations LANES r .. LANES r + LANES - 1);
// every lane gets it.
fn row_sum4(lid: u32, v: vec4<f32>) -> vec4<f32> {
    return lanes_sum4(lid, v, LANES);
}

fn row_sum(lid: u32, v: f32) -> f32 {
    return row_sum4(lid, vec4<f32>(v, 0.0, 0.0, 0.0)).x;
}

fn row_sum2(lid: u32, v: vec2<f32>) -> vec2<f32> {
    return row_sum4(lid, vec4<f32>(v, 0.0, 0.0)).xy;
}

// Sum over aligned groups of 8 lanes (invocations 8g .. 8g + 7); every lane gets it.
fn oct_sum(lid: u32, v: f32) -> f32 {
    var s = v + subgroupShuffleXor(v, 4u);
    s += subgroupShuffleXor(s, 2u);
    return s + subgroupShuffleXor(s, 1u);
}

// oct_sum of each component.
fn oct_sum4(lid: u32, v: vec4<f32>) -> vec4<f32> {
    var s = v + subgroupShuffleXor(v, 4u);
    s += subgroupShuffleXor(s, 2u);
    return s + subgroupShuffleXor(s, 1u);
}

// Componentwise max over the whole workgroup of 256; every invocation gets it.
fn wg_max4(lid: u32, v: vec4<f32>) -> vec4<f32> {
    let m = subgroupMax(v);
    if lid % 32u == 0u {
        sg_part4[lid / 32u] = m;
    }
    workgroupBarrier();
    var r = sg_part4[0];
    for (var i = 1u; i < 8u; i++) {
        r = max(r, sg_part4[i]);
    }
    workgroupBarrier();
    return r;
}

// The best (f32 bits, id) over the 32 lanes of `lid`'s subgroup: the largest v (NaN and id NONE
// excluded), the lowest id on ties; (0, NONE) when no lane has a candidate.
// -inf, as a run-time value: a WGSL const-expression must not evaluate to an infinity (Tint,
// the browsers' compiler, rejects `-bitcast<f32>(0x7f800000u)`; Naga accepts it).
var<private> neg_inf_bits: u32 = 0xff800000u;

fn row_best(lid: u32, v: f32, id: u32) -> vec2<u32> {
    let ok = v == v && id != 0xffffffffu;
    let vmax = subgroupMax(select(bitcast<f32>(neg_inf_bits), v, ok));
    let bid = subgroupMin(select(0xffffffffu, id, ok && v == vmax));
    return select(vec2<u32>(bitcast<u32>(vmax), bid), vec2<u32>(0u, bid), bid == 0xffffffffu);
}
