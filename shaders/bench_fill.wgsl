// Probe helper: fills a buffer with a non-trivial pattern before bandwidth runs
// (timing over zeros can flatter compressed memory and hides unwritten data).

@group(0) @binding(0) var<storage, read_write> dst: array<vec4<u32>>; // [n_vec4]

@compute @workgroup_size(256)
fn fill(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i = gid.x; i < arrayLength(&dst); i += stride) {
        let h = i * 2654435761u;
        dst[i] = vec4<u32>(h, h ^ 0x9e3779b9u, h + 0x7f4a7c15u, ~h);
    }
}
