// What recording a compute pass costs the host through Dawn (the `webgpu` package in Node), per
// WebGPU call: the fused decode step records ~123 dispatches, each today as setPipeline +
// setBindGroup + dispatchWorkgroups. Plain JS, no wasm: this isolates Dawn's own per-call cost
// from wgpu's and wasm-bindgen's. Usage: node bench/dawn-calls.mjs DAWN_DIR [OUT.json]
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [dawnDir, outPath] = process.argv.slice(2);
const { create, globals } = await import(pathToFileURL(join(resolve(dawnDir), "index.js")).href);
Object.assign(globalThis, globals);
const gpu = create([]);
const adapter = await gpu.requestAdapter();
const device = await adapter.requestDevice();

const STEPS = 32; // a fused chunk
const PER_STEP = 123; // SmolLM2's fused step: embed, 30 × 4, head, choose
const ROLES = 4;
const LAYERS = 30;
const REPEATS = 7;

function shader(bindings, role) {
  let s = "";
  for (let i = 0; i < bindings - 1; i++) s += `@group(0) @binding(${i}) var<storage, read> b${i}: array<u32>;\n`;
  s += `@group(0) @binding(${bindings - 1}) var<storage, read_write> out: array<u32>;\n`;
  s += `@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u) {\n  var v = ${role}u;\n`;
  for (let i = 0; i < bindings - 1; i++) s += `  v += b${i}[0];\n`;
  s += "  if (g.x == 0u) { out[0] = v; }\n}\n";
  return s;
}

function buffer(usage = GPUBufferUsage.STORAGE) {
  return device.createBuffer({ size: 256, usage });
}

// A set of ROLES pipelines and LAYERS × ROLES bind groups of `bindings` storage buffers each
// (distinct buffers, as distinct weights are), plus one shared bind group.
function setup(bindings) {
  const layout = device.createBindGroupLayout({
    entries: Array.from({ length: bindings }, (_, i) => ({
      binding: i,
      visibility: GPUShaderStage.COMPUTE,
      buffer: { type: i === bindings - 1 ? "storage" : "read-only-storage" },
    })),
  });
  const pipelineLayout = device.createPipelineLayout({ bindGroupLayouts: [layout] });
  const pipelines = Array.from({ length: ROLES }, (_, r) =>
    device.createComputePipeline({
      layout: pipelineLayout,
      compute: { module: device.createShaderModule({ code: shader(bindings, r) }), entryPoint: "main" },
    }));
  const out = buffer();
  const groups = Array.from({ length: LAYERS * ROLES }, () =>
    device.createBindGroup({
      layout,
      entries: Array.from({ length: bindings }, (_, i) => ({
        binding: i,
        resource: { buffer: i === bindings - 1 ? out : buffer() },
      })),
    }));
  return { pipelines, groups };
}

// Records STEPS × PER_STEP dispatches in one pass the way `mode` says, submits, waits.
function recordOnce(set, mode) {
  const t0 = performance.now();
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  if (mode === "bindOnce" || mode === "dispatchOnly") pass.setBindGroup(0, set.groups[0]);
  if (mode === "dispatchOnly") pass.setPipeline(set.pipelines[0]);
  for (let s = 0; s < STEPS; s++) {
    for (let d = 0; d < PER_STEP; d++) {
      const g = d % (LAYERS * ROLES);
      if (mode === "full" || mode === "bindOnce") pass.setPipeline(set.pipelines[g % ROLES]);
      if (mode === "full") pass.setBindGroup(0, set.groups[g]);
      pass.dispatchWorkgroups(64);
    }
  }
  pass.end();
  const cb = enc.finish();
  const t1 = performance.now();
  device.queue.submit([cb]);
  const t2 = performance.now();
  return { record: t1 - t0, submit: t2 - t1 };
}

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const rows = [];
for (const bindings of [8, 2]) {
  const set = setup(bindings);
  for (const mode of ["full", "bindOnce", "dispatchOnly"]) {
    const rec = [], sub = [], gpuMs = [];
    for (let i = 0; i < REPEATS + 1; i++) {
      const t0 = performance.now();
      const r = recordOnce(set, mode);
      await device.queue.onSubmittedWorkDone();
      const total = performance.now() - t0;
      if (i === 0) continue; // warm-up
      rec.push(r.record); sub.push(r.submit); gpuMs.push(total);
    }
    const n = STEPS * PER_STEP;
    const row = {
      bindings, mode, dispatches: n,
      recordMicrosecondsPerDispatch: (median(rec) * 1e3) / n,
      submitMicrosecondsPerDispatch: (median(sub) * 1e3) / n,
      totalMicrosecondsPerDispatch: (median(gpuMs) * 1e3) / n,
      recordMicrosecondsPerStep: (median(rec) * 1e3) / STEPS,
    };
    rows.push(row);
    console.log(`bindings ${bindings} ${mode.padEnd(12)} record ${row.recordMicrosecondsPerDispatch.toFixed(2)} µs/dispatch ` +
      `(${row.recordMicrosecondsPerStep.toFixed(0)} µs per ${PER_STEP}-dispatch step), submit ${row.submitMicrosecondsPerDispatch.toFixed(2)}, ` +
      `record+submit+wait ${row.totalMicrosecondsPerDispatch.toFixed(2)} µs/dispatch`);
  }
}
// One round trip, as a simulation generation or an unfused token pays it: write 4 bytes, one
// trivial dispatch, copy 4 bytes out, submit, mapAsync, read.
const rt = [];
{
  const set = setup(2);
  const staging = device.createBuffer({ size: 256, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const src = device.createBuffer({ size: 256, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  const bg = device.createBindGroup({ layout: set.pipelines[0].getBindGroupLayout(0), entries: [
    { binding: 0, resource: { buffer: buffer() } }, { binding: 1, resource: { buffer: src } }] });
  for (let i = 0; i < 60; i++) {
    const t0 = performance.now();
    device.queue.writeBuffer(src, 0, new Uint32Array([i]));
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(set.pipelines[0]);
    pass.setBindGroup(0, bg);
    pass.dispatchWorkgroups(1);
    pass.end();
    enc.copyBufferToBuffer(src, 0, staging, 0, 4);
    device.queue.submit([enc.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    new Uint32Array(staging.getMappedRange()).slice();
    staging.unmap();
    if (i >= 10) rt.push((performance.now() - t0) * 1e3);
  }
}
const roundTrip = { medianMicroseconds: median(rt), min: Math.min(...rt), max: Math.max(...rt) };
console.log(`round trip (write, 1 dispatch, copy, submit, mapAsync): median ${roundTrip.medianMicroseconds.toFixed(0)} µs (${roundTrip.min.toFixed(0)}–${roundTrip.max.toFixed(0)})`);
const info = adapter.info ?? {};
const report = { kind: "dawn-calls", date: new Date().toISOString().slice(0, 10), adapter: { vendor: info.vendor, description: info.description }, rows, roundTrip };
if (outPath) writeFileSync(outPath, JSON.stringify(report, null, 2));
