// Probe micro-benchmark: read bandwidth with a chosen number of workgroups.
//
// Streams the whole buffer as vec4<u32> with a grid-stride loop, so the number of workgroups
// dispatched alone decides how many loads are in flight; each invocation stores its xor so the
// loads cannot be optimised away. The sink (4 bytes per invocation) is small next to the reads.

@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;  // [n_vec4]
@group(0) @binding(1) var<storage, read_write> sink: array<u32>; // [workgroups * 256]

@compute @workgroup_size(256)
fn read_all(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    var acc = vec4<u32>(0u);
    for (var i = gid.x; i < arrayLength(&src); i += stride) {
        acc ^= src[i];
    }
    sink[gid.x] = acc.x ^ acc.y ^ acc.z ^ acc.w;
}
