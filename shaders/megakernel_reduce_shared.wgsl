// The megakernel's workgroup reductions, workgroup-memory version (every adapter): trees over
// `red4` / `red_u` with a barrier per level. megakernel_reduce_subgroup.wgsl defines the same
// functions with subgroup operations where subgroups are exactly 32 wide. Every function must
// be called in uniform control flow by the whole workgroup (WG = 256 invocations).

var<workgroup> red4: array<vec4<f32>, WG>;
var<workgroup> red_u: array<u32, WG>;

// Sums over aligned groups of `width` invocations (a power of two <= WG); every invocation
// of the group gets its group's. Uniform control flow only.
fn lanes_sum4(lid: u32, v: vec4<f32>, width: u32) -> vec4<f32> {
    red4[lid] = v;
    for (var st = width / 2u; st > 0u; st >>= 1u) {
        workgroupBarrier();
        if lid % width < st {
            red4[lid] += red4[lid + st];
        }
    }
    workgroupBarrier();
    let r = red4[lid - lid % width];
    workgroupBarrier();
    return r;
}

// Maxima over aligned groups of `width` invocations (a power of two <= WG); every invocation
// of the group gets its group's.
fn lanes_max(lid: u32, v: f32, width: u32) -> f32 {
    red4[lid].x = v;
    for (var st = width / 2u; st > 0u; st >>= 1u) {
        workgroupBarrier();
        if lid % width < st {
            red4[lid].x = max(red4[lid].x, red4[lid + st].x);
        }
    }
    workgroupBarrier();
    let r = red4[lid - lid % width].x;
    workgroupBarrier();
    return r;
}

// The best (value, id) over the workgroup (`better`: highest value, lowest id on ties; NaN
// and NONE never win), as (f32 bits, id), to every invocation.
fn wg_best(lid: u32, z: f32, i: u32) -> vec2<u32> {
    red4[lid].x = z;
    red_u[lid] = i;
    for (var st = WG / 2u; st > 0u; st >>= 1u) {
        workgroupBarrier();
        if lid < st {
            let oz = red4[lid + st].x;
            let oi = red_u[lid + st];
            if oi != NONE && (red_u[lid] == NONE || better(oz, oi, red4[lid].x, red_u[lid])) {
                red4[lid].x = oz;
                red_u[lid] = oi;
            }
        }
    }
    workgroupBarrier();
    let r = vec2<u32>(bitcast<u32>(red4[0].x), red_u[0]);
    workgroupBarrier();
    return r;
}
