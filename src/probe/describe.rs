//! Turning wgpu's adapter description into the report's identity, features, limits and fit.

use super::report::{AdapterIdentity, AdapterLimits, FeatureReport, ModelFit};

/// Storage bindings a fused kernel keeps for activations, KV cache, tokens and parameters;
/// the rest of `maxStorageBuffersPerShaderStage` can hold weights.
pub const RESERVED_BINDINGS: u32 = 4;

impl From<&wgpu::Limits> for AdapterLimits {
    fn from(l: &wgpu::Limits) -> Self {
        Self {
            max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
            max_buffer_size: l.max_buffer_size,
            max_uniform_buffer_binding_size: l.max_uniform_buffer_binding_size,
            max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
            max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
            max_compute_workgroup_size_x: l.max_compute_workgroup_size_x,
            max_compute_workgroup_size_y: l.max_compute_workgroup_size_y,
            max_compute_workgroup_size_z: l.max_compute_workgroup_size_z,
            max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
            max_storage_buffers_per_shader_stage: l.max_storage_buffers_per_shader_stage,
            max_uniform_buffers_per_shader_stage: l.max_uniform_buffers_per_shader_stage,
            max_bind_groups: l.max_bind_groups,
            max_bindings_per_bind_group: l.max_bindings_per_bind_group,
            min_storage_buffer_offset_alignment: l.min_storage_buffer_offset_alignment,
            min_uniform_buffer_offset_alignment: l.min_uniform_buffer_offset_alignment,
        }
    }
}

/// The WebGPU spec defaults (wgpu's `Limits::default()` is defined as exactly those).
pub fn webgpu_defaults() -> AdapterLimits {
    AdapterLimits::from(&wgpu::Limits::default())
}

/// Feature names in WebGPU spelling (`SHADER_F16` → `shader-f16`).
pub fn feature_names(features: wgpu::Features) -> Vec<String> {
    features
        .iter_names()
        .map(|(name, _)| match name {
            "SUBGROUP" => "subgroups".to_string(),
            other => other.to_ascii_lowercase().replace('_', "-"),
        })
        .collect()
}

pub fn features(features: wgpu::Features, info: &wgpu::AdapterInfo) -> FeatureReport {
    let subgroups = features.contains(wgpu::Features::SUBGROUP);
    FeatureReport {
        shader_f16: features.contains(wgpu::Features::SHADER_F16),
        subgroups,
        subgroup_min_size: if subgroups { info.subgroup_min_size } else { 0 },
        subgroup_max_size: if subgroups { info.subgroup_max_size } else { 0 },
        timestamp_query: features.contains(wgpu::Features::TIMESTAMP_QUERY),
        all: feature_names(features),
    }
}

pub fn fit(limits: &AdapterLimits, features: &FeatureReport) -> ModelFit {
    let max_tensor_bytes = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size);
    let weight_bindings = limits
        .max_storage_buffers_per_shader_stage
        .saturating_sub(RESERVED_BINDINGS);
    let wg_bytes = limits.max_compute_workgroup_storage_size;
    ModelFit {
        max_tensor_bytes,
        max_weight_bytes_per_dispatch: u64::from(weight_bindings) * max_tensor_bytes,
        reserved_bindings: RESERVED_BINDINGS,
        f16_kernels: features.shader_f16,
        subgroup_kernels: features.subgroups,
        max_resident_dim_f32: wg_bytes / (2 * 4),
        max_resident_dim_f16: if features.shader_f16 {
            wg_bytes / (2 * 2)
        } else {
            0
        },
    }
}

fn device_type(t: wgpu::DeviceType) -> &'static str {
    match t {
        wgpu::DeviceType::DiscreteGpu => "discrete-gpu",
        wgpu::DeviceType::IntegratedGpu => "integrated-gpu",
        wgpu::DeviceType::VirtualGpu => "virtual-gpu",
        wgpu::DeviceType::Cpu => "cpu",
        wgpu::DeviceType::Other => "unknown",
    }
}

/// CPU implementations of Vulkan/WebGPU/D3D12 that report themselves as ordinary GPUs at times.
fn looks_software(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "llvmpipe",
        "lavapipe",
        "swiftshader",
        "microsoft basic render",
        "warp",
        "softpipe",
    ]
    .iter()
    .any(|s| t.contains(s))
}

/// Identity from wgpu's `AdapterInfo`, completed with the browser's `GPUAdapterInfo` strings
/// (vendor, architecture, device, description) that wgpu does not carry over on the web.
pub fn identity(info: &wgpu::AdapterInfo, web: Option<WebAdapterInfo>) -> AdapterIdentity {
    let backend = match info.backend {
        wgpu::Backend::BrowserWebGpu => "webgpu".to_string(),
        other => other.to_str().to_string(),
    };
    let mut id = AdapterIdentity {
        vendor: format!("{:#06x}", info.vendor),
        architecture: String::new(),
        device: info.name.clone(),
        description: [info.driver.as_str(), info.driver_info.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" "),
        backend,
        device_type: device_type(info.device_type).to_string(),
        is_software: false,
    };
    if let Some(web) = web {
        id.vendor = web.vendor;
        id.architecture = web.architecture;
        id.device = web.device;
        id.description = web.description;
    }
    let text = format!(
        "{} {} {} {}",
        id.vendor, id.architecture, id.device, id.description
    );
    id.is_software = info.device_type == wgpu::DeviceType::Cpu || looks_software(&text);
    id
}

/// `GPUAdapterInfo` strings as the browser reports them.
#[derive(Debug, Clone, Default)]
pub struct WebAdapterInfo {
    pub vendor: String,
    pub architecture: String,
    pub device: String,
    pub description: String,
}
