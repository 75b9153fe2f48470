//! Adapter and device acquisition.
//!
//! We ask the adapter for *its* limits (not the WebGPU defaults): model fit is decided by
//! maxStorageBufferBindingSize and friends, and the defaults (128 MiB binding) would refuse
//! models the hardware can hold. Optional features (shader-f16, subgroups, timestamp-query) are
//! requested only when the adapter has them; kernels pick their variant at run time.

use crate::error::{FuselmError, Result};
use std::sync::{Arc, Mutex};

/// Features we use when present; none is required. `MEMORY_DECORATION_COHERENT` (native
/// only) is for the grid-barrier experiments (`bench/grid_barrier`).
pub const OPTIONAL_FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::SUBGROUP)
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::MEMORY_DECORATION_COHERENT);

/// The backends fuselm uses: the browser's WebGPU on wasm32, Vulkan/Metal/DX12 natively.
pub const BACKENDS: wgpu::Backends = if cfg!(target_arch = "wasm32") {
    wgpu::Backends::BROWSER_WEBGPU
} else {
    wgpu::Backends::PRIMARY
};

/// Finds the high-performance adapter, or explains why there is none.
pub async fn request_adapter() -> Result<wgpu::Adapter> {
    request_adapter_with(BACKENDS).await
}

/// [`request_adapter`] restricted to `backends` (tests use an empty set to see the error path).
pub async fn request_adapter_with(backends: wgpu::Backends) -> Result<wgpu::Adapter> {
    #[cfg(target_arch = "wasm32")]
    if !wgpu::util::is_browser_webgpu_supported().await {
        return Err(FuselmError::WebGpuUnavailable {
            reason: "navigator.gpu is missing: this browser or context has no WebGPU \
                     (needs a secure context and a WebGPU-capable browser)"
                .into(),
        });
    }
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    let instance = wgpu::Instance::new(desc);
    let options = wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    };
    instance
        .request_adapter(&options)
        .await
        .map_err(|e| FuselmError::NoAdapter {
            reason: e.to_string(),
        })
}

/// An adapter with its device and queue, plus what we learned about them. Each model owns its
/// context; dropping it destroys the device, which frees every buffer made on it at once (in
/// browsers, dropping a wgpu buffer only drops a JS reference, and its GPU memory would wait for
/// garbage collection).
pub struct GpuContext {
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    /// The adapter as the probe reports it (browser strings included; `is_software`).
    pub identity: crate::probe::AdapterIdentity,
    /// Whether the device has subgroups (in a browser, asked for and checked by
    /// `browser_subgroups`, since wgpu's WebGPU backend does not know the feature).
    subgroups: bool,
    /// Set by the device-lost callback: why the device was lost.
    lost: Arc<Mutex<Option<String>>>,
}

impl Drop for GpuContext {
    fn drop(&mut self) {
        self.device.destroy();
    }
}

impl GpuContext {
    /// Requests the best adapter and a device with its full limits and our optional features.
    pub async fn new() -> Result<Self> {
        Self::from_adapter(request_adapter().await?).await
    }

    pub async fn from_adapter(adapter: wgpu::Adapter) -> Result<Self> {
        let features = adapter.features() & OPTIONAL_FEATURES;
        let desc = wgpu::DeviceDescriptor {
            label: Some("fuselm"),
            required_features: features,
            required_limits: adapter.limits(),
            ..Default::default()
        };
        // In a browser wgpu cannot ask for `subgroups` (browser_subgroups.rs says why).
        #[cfg(target_arch = "wasm32")]
        let request = super::browser_subgroups::request_device(&adapter, &desc);
        #[cfg(not(target_arch = "wasm32"))]
        let request = adapter.request_device(&desc);
        let (device, queue) = request.await.map_err(|e| FuselmError::DeviceRequest {
            reason: e.to_string(),
        })?;
        #[cfg(target_arch = "wasm32")]
        let subgroups = super::browser_subgroups::has_subgroups(&device);
        #[cfg(not(target_arch = "wasm32"))]
        let subgroups = device.features().contains(wgpu::Features::SUBGROUP);
        let info = adapter.get_info();
        let identity = crate::probe::identify(&info).await;
        let lost = Arc::new(Mutex::new(None));
        let flag = Arc::clone(&lost);
        device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut slot) = flag.lock() {
                *slot = Some(format!("{reason:?}: {message}"));
            }
        });
        Ok(Self {
            adapter,
            device,
            queue,
            info,
            identity,
            subgroups,
            lost,
        })
    }

    /// Why the device was lost, if it was (then every GPU operation fails: load the model again).
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().ok().and_then(|slot| slot.clone())
    }

    /// `err` as [`FuselmError::DeviceLost`] when the device is gone (a failed map or validation
    /// error is then only a symptom), else unchanged.
    pub fn explain(&self, err: FuselmError) -> FuselmError {
        match self.lost() {
            Some(why) if !matches!(err, FuselmError::DeviceLost(_)) => FuselmError::DeviceLost(why),
            _ => err,
        }
    }

    pub fn has(&self, feature: wgpu::Features) -> bool {
        self.device.features().contains(feature)
    }

    /// Whether kernels may reduce a 32-lane row with subgroup operations: the device has
    /// subgroups and they are always exactly 32 wide (NVIDIA, Apple), so a row of 32
    /// consecutive invocations is one subgroup. Natively, `FUSELM_NO_SUBGROUPS=1` turns them
    /// off (to compare both paths on one device).
    pub fn subgroups32(&self) -> bool {
        #[cfg(not(target_arch = "wasm32"))]
        if std::env::var_os("FUSELM_NO_SUBGROUPS").is_some_and(|v| !v.is_empty() && v != "0") {
            return false;
        }
        self.subgroups && self.info.subgroup_min_size == 32 && self.info.subgroup_max_size == 32
    }

    /// The WGSL `enable` line that subgroup operations need: browsers' WGSL compilers require
    /// `enable subgroups;`, while Naga (native wgpu) rejects the directive and allows the
    /// builtins whenever the device has the feature.
    pub fn subgroups_enable(&self) -> &'static str {
        if cfg!(target_arch = "wasm32") {
            "enable subgroups;\n"
        } else {
            ""
        }
    }

    /// Compiles one of fuselm's own WGSL modules. Validation errors are caught as a typed error
    /// instead of wgpu's default behaviour (a panic natively, a console error in browsers).
    ///
    /// Natively the module is compiled without Naga's forced loop bounding: Naga otherwise
    /// threads a 64-bit countdown through every loop (a guard against infinite loops, which
    /// drivers may treat as unreachable), and that stops the driver from unrolling the kernels'
    /// constant-trip loops and keeping their small arrays in registers: on an H200 the fused
    /// decode step went from 1,000 to 690 µs without it (bench/NOTES.md). Bounds checks stay.
    /// Browsers compile WGSL themselves and ignore this. Never use it for WGSL that fuselm did
    /// not write.
    pub async fn shader(&self, label: &str, source: &str) -> Result<wgpu::ShaderModule> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(label),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        };
        // SAFETY: `create_shader_module_trusted` requires that no loop is infinite (and, with
        // `FUSELM_SHADER_CHECKS=none`, that no access is out of bounds). Every loop of
        // `shaders/*.wgsl` counts a u32 up to a bound by a positive step (a constant, or
        // `WG`/`LANES`/`stride`) or shifts a power of two down to zero or up to a small
        // constant; the bounds are shape constants or lengths validated when the model is
        // loaded (n_ctx, n_vocab, tensor sizes < 2^32 - step), so no counter wraps.
        let module = unsafe {
            self.device
                .create_shader_module_trusted(desc, shader_checks())
        };
        match scope.pop().await {
            Some(e) => Err(FuselmError::Gpu(format!("shader {label}: {e}"))),
            None => Ok(module),
        }
    }

    /// Compiles WGSL that is not ours with every runtime check WebGPU defines (the safe
    /// `create_shader_module`); errors as in [`GpuContext::shader`].
    pub async fn shader_checked(&self, label: &str, source: &str) -> Result<wgpu::ShaderModule> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
        match scope.pop().await {
            Some(e) => Err(FuselmError::Gpu(format!("shader {label}: {e}"))),
            None => Ok(module),
        }
    }

    /// A compute pipeline with an automatic layout for `entry` in `module`.
    pub fn pipeline(
        &self,
        label: &str,
        module: &wgpu::ShaderModule,
        entry: &str,
    ) -> wgpu::ComputePipeline {
        self.device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: None,
                module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
    }
}

/// The runtime checks fuselm's kernels are compiled with: wgpu's, less forced loop bounding
/// (see [`GpuContext::shader`]). Native measurement knob `FUSELM_SHADER_CHECKS`: `default`
/// restores wgpu's defaults, `none` also drops the bounds checks.
fn shader_checks() -> wgpu::ShaderRuntimeChecks {
    let ours = wgpu::ShaderRuntimeChecks {
        force_loop_bounding: false,
        ..wgpu::ShaderRuntimeChecks::checked()
    };
    #[cfg(not(target_arch = "wasm32"))]
    match std::env::var("FUSELM_SHADER_CHECKS").as_deref() {
        Ok("default") => return wgpu::ShaderRuntimeChecks::checked(),
        Ok("none") => return wgpu::ShaderRuntimeChecks::unchecked(),
        _ => {}
    }
    ours
}
