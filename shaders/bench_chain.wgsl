// Probe micro-benchmark: the cost of one dependent dispatch inside a compute pass.
//
// Each dispatch reads and writes the same cell, so the GPU must finish one before starting the
// next (WebGPU orders dispatches that share a writable storage binding). The final value doubles
// as a check that every dispatch ran.

@group(0) @binding(0) var<storage, read_write> cell: array<u32>; // [1]

@compute @workgroup_size(1)
fn step() {
    cell[0] = cell[0] + 1u;
}
