//! The types `probe()` returns. They are the public contract of the probe API: serde names are
//! camelCase (the WebGPU spelling) and, on wasm32, tsify turns them into the TypeScript types of
//! the npm package's `.d.ts`.

use serde::{Deserialize, Serialize};

/// What to probe. Every field is optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct ProbeOptions {
    /// Run the micro-benchmarks (dispatch cost, round trip, read bandwidth). Takes ~1 s on a GPU,
    /// longer on software adapters. Default: false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub bench: Option<bool>,
    /// Bytes the bandwidth benchmark streams per run, clamped to the adapter's binding limit.
    /// Default: 256 MiB (larger than any GPU's L2, so it measures memory, not cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub bench_bytes: Option<u64>,
    /// Timed runs per measurement (the median is reported). Default: 7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub runs: Option<u32>,
}

/// Everything fuselm knows about the user's GPU adapter.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct AdapterReport {
    pub adapter: AdapterIdentity,
    pub features: FeatureReport,
    /// The adapter's limits (what fuselm requests for its device).
    pub limits: AdapterLimits,
    /// The WebGPU spec defaults, i.e. what a page gets without asking for more.
    pub webgpu_defaults: AdapterLimits,
    pub fit: ModelFit,
    /// Present when `bench: true` was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub bench: Option<BenchReport>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct AdapterIdentity {
    /// Vendor: a name in browsers ("nvidia", "google"); natively the PCI vendor id as hex ("0x10de").
    pub vendor: String,
    /// GPU architecture where the browser exposes it ("swiftshader", "hopper"); may be empty.
    pub architecture: String,
    /// Device name natively ("NVIDIA H100 80GB HBM3"), or the browser's device string; may be empty.
    pub device: String,
    /// Free-form description (driver name and version natively, browser description on the web).
    pub description: String,
    /// "vulkan", "metal", "dx12" natively; "webgpu" in browsers.
    pub backend: String,
    /// "discrete-gpu", "integrated-gpu", "virtual-gpu", "cpu" or "unknown".
    pub device_type: String,
    /// True for CPU rasterizers (lavapipe, SwiftShader, WARP): expect ~100× slower generation.
    pub is_software: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct FeatureReport {
    /// `shader-f16`: f16 arithmetic and storage in WGSL (halves KV-cache and activation bytes).
    pub shader_f16: bool,
    /// `subgroups`: subgroup reductions, used by the fast reduction kernels.
    pub subgroups: bool,
    /// Smallest and largest subgroup size the adapter may use (0 when `subgroups` is false).
    pub subgroup_min_size: u32,
    pub subgroup_max_size: u32,
    /// `timestamp-query` on pass boundaries, used for GPU-side timing.
    pub timestamp_query: bool,
    /// Every feature the adapter reports, in WebGPU spelling where one exists.
    pub all: Vec<String>,
}

/// The limits that decide whether and how a model fits. Bytes are plain numbers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct AdapterLimits {
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_uniform_buffer_binding_size: u64,
    pub max_compute_workgroup_storage_size: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroup_size_x: u32,
    pub max_compute_workgroup_size_y: u32,
    pub max_compute_workgroup_size_z: u32,
    pub max_compute_workgroups_per_dimension: u32,
    pub max_storage_buffers_per_shader_stage: u32,
    pub max_uniform_buffers_per_shader_stage: u32,
    pub max_bind_groups: u32,
    pub max_bindings_per_bind_group: u32,
    pub min_storage_buffer_offset_alignment: u32,
    pub min_uniform_buffer_offset_alignment: u32,
}

/// Answers a user needs before downloading a model.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct ModelFit {
    /// Largest single tensor that one storage binding can see:
    /// min(maxStorageBufferBindingSize, maxBufferSize). Larger tensors must be split across bindings.
    pub max_tensor_bytes: u64,
    /// Largest total of weights one dispatch can bind: (maxStorageBuffersPerShaderStage − the
    /// bindings a fused kernel keeps for activations, KV cache and tokens) × maxTensorBytes. This
    /// bounds the models that the single-dispatch generation mode can run.
    pub max_weight_bytes_per_dispatch: u64,
    /// Storage bindings a fused kernel reserves for non-weight data (activations, KV, tokens).
    pub reserved_bindings: u32,
    /// f16 kernels (f16 KV cache and activations) can be used.
    pub f16_kernels: bool,
    /// Subgroup-reduction kernels can be used.
    pub subgroup_kernels: bool,
    /// Largest model dimension a single-workgroup fused kernel can keep resident in workgroup
    /// memory as f32: two vectors of that length (hidden state and its normalized copy) must fit
    /// in maxComputeWorkgroupStorageSize.
    pub max_resident_dim_f32: u32,
    /// The same with f16 storage, when shader-f16 exists (else 0).
    pub max_resident_dim_f16: u32,
}

/// How a duration was measured.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub enum TimerKind {
    /// GPU timestamps written at compute-pass boundaries (browsers may quantize them, ~100 µs in Chrome).
    TimestampQuery,
    /// Host clock around a submit whose completion was awaited (includes queue latency).
    WallClock,
}

/// One measured quantity: the median over `samples`, with the spread.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct Measurement {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// "us" (microseconds) or "GB/s" (10^9 bytes per second).
    pub unit: String,
    pub timer: TimerKind,
    /// Every run's value, in run order.
    pub samples: Vec<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct BenchReport {
    /// Cost of one more dependent dispatch inside a single compute pass (µs): the unit cost of a
    /// fused generation, which encodes every step into one pass.
    pub dependent_dispatch: Measurement,
    /// Dispatches chained per run to measure `dependentDispatch` (difference of two chain lengths).
    pub chain_length: u32,
    /// One submit of a tiny dispatch plus reading 4 bytes back (µs): what a pipeline pays per
    /// token when the CPU chooses the next token.
    pub submit_and_readback: Measurement,
    /// Read bandwidth of one workgroup of 256 invocations (GB/s).
    pub read_bandwidth_one_workgroup: Measurement,
    /// Read bandwidth of `manyWorkgroups` workgroups of 256 invocations (GB/s).
    pub read_bandwidth_many_workgroups: Measurement,
    pub many_workgroups: u32,
    /// Bytes streamed per bandwidth run.
    pub read_bytes: u64,
}
