//! Adapter and device acquisition.
//!
//! We ask the adapter for *its* limits (not the WebGPU defaults): model fit is decided by
//! maxStorageBufferBindingSize and friends, and the defaults (128 MiB binding) would refuse
//! models the hardware can hold. Optional features (shader-f16, subgroups, timestamp-query) are
//! requested only when the adapter has them; kernels pick their variant at run time.

use crate::error::{FuselmError, Result};
#[cfg(not(target_arch = "wasm32"))]
use crate::gpu::loop_proof;
use crate::kernels::tuning::KernelTuning;
use std::sync::{Arc, Mutex};

/// Features we use when present; none is required. `MEMORY_DECORATION_COHERENT` (native
/// only) is for the grid-barrier experiments (`bench/grid_barrier`).
pub const OPTIONAL_FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::SUBGROUP)
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::MEMORY_DECORATION_COHERENT);

/// Experimental features requested where the adapter has them, natively, when
/// `KernelTuning::matmul_coop` asks for the kernel that uses them: cooperative matrices (tensor
/// cores) for the prefill matrix product (`shaders/matmul_coop.wgsl`; opt-in: slower than the
/// SIMT tiles as built, bench/NOTES.md). Browsers have no such feature in wgpu.
pub const NATIVE_EXPERIMENTAL_FEATURES: wgpu::Features = if cfg!(target_arch = "wasm32") {
    wgpu::Features::empty()
} else {
    wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
};

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

/// How a [`GpuContext`] compiles fuselm's kernels. `Default` is what every user gets: the
/// kernels' measured parameters, subgroup reductions where subgroups are 32 wide, and no loop
/// bounding for kernels whose loops are proved to terminate. The other settings exist to
/// measure alternatives on one device (the native CLI sets them from `--tune`;
/// bench/NOTES.md has the measurements).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContextOptions {
    /// Reduce through workgroup memory even where subgroups are 32 wide
    /// ([`GpuContext::subgroups32`] is then false), to compare both paths on one device.
    pub no_subgroups: bool,
    /// Compile every kernel with Naga's forced loop bounding too (wgpu's full runtime checks),
    /// even those whose loops are proved to terminate (see [`GpuContext::shader`] for why it is
    /// off by default).
    pub force_loop_bounding: bool,
    /// Overrides of the kernels' launch parameters.
    pub tuning: KernelTuning,
}

/// An adapter with its device and queue, plus what we learned about them, and the buffers made
/// through it. A model owns one context; [`GpuContext::sibling`] makes another on the same
/// device (several models on one device, and a later load on the device of an earlier one),
/// sharing the device's compiled pipelines ([`GpuContext::cached_pipeline`]): a second load of
/// the same model compiles nothing. Dropping a context destroys every buffer made through
/// [`GpuContext::create_buffer`] and [`GpuContext::create_buffer_init`] at once (in browsers,
/// dropping a wgpu buffer only drops a JS reference, and its GPU memory would wait for garbage
/// collection); the device is destroyed with its last context.
pub struct GpuContext {
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    /// The adapter as the probe reports it (browser strings included; `is_software`).
    pub identity: crate::probe::AdapterIdentity,
    shared: Arc<DeviceShared>,
    options: ContextOptions,
    /// The buffers made through this context, destroyed with it.
    buffers: Mutex<Vec<wgpu::Buffer>>,
    /// Pipelines this context compiled (not found in the device's cache).
    compiled: std::sync::atomic::AtomicUsize,
}

/// What the contexts on one device share.
struct DeviceShared {
    device: wgpu::Device,
    /// Whether the device has subgroups (in a browser, asked for and checked by
    /// `web::sys::subgroups`, since wgpu's WebGPU backend does not know the feature).
    subgroups: bool,
    /// Set by the device-lost callback: why the device was lost.
    lost: Arc<Mutex<Option<String>>>,
    /// The modules [`GpuContext::shader`] could not prove loop-safe (see
    /// [`GpuContext::unproven_loops`]).
    unproven: Mutex<Vec<String>>,
    /// The uniform fields the proofs assumed below `loop_proof::PARAM_LIMIT`
    /// (see [`GpuContext::loop_assumptions`]).
    assumed: Mutex<std::collections::BTreeSet<String>>,
    /// Compiled pipelines by what they were compiled from ([`PipelineKey`]).
    pipelines: Mutex<std::collections::HashMap<PipelineKey, CachedPipeline>>,
    /// Pipelines compiled on this device so far (cache misses).
    compiled: std::sync::atomic::AtomicUsize,
}

impl Drop for DeviceShared {
    fn drop(&mut self) {
        self.device.destroy();
    }
}

impl Drop for GpuContext {
    fn drop(&mut self) {
        let buffers = self.buffers.get_mut().map(std::mem::take);
        for b in buffers.unwrap_or_default() {
            b.destroy();
        }
    }
}

/// What a compiled pipeline is compiled from: its label, WGSL source, binding layout and how the
/// module was checked; equal keys compile to the same pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    pub label: String,
    pub source: String,
    /// The binding layout, as the kernel layer encodes it.
    pub layout: Vec<u8>,
    /// Compiled with every runtime check (WGSL that is not ours).
    pub checked: bool,
}

/// A compiled pipeline with its bind group layout.
#[derive(Debug, Clone)]
pub struct CachedPipeline {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
}

impl GpuContext {
    /// Requests the best adapter and a device with its full limits and our optional features.
    pub async fn new() -> Result<Self> {
        Self::with_options(ContextOptions::default()).await
    }

    /// [`GpuContext::new`] with `options` (refused with "invalid-argument" when a tuning value
    /// is out of range).
    pub async fn with_options(options: ContextOptions) -> Result<Self> {
        options.tuning.check()?;
        Self::from_adapter_with(request_adapter().await?, options).await
    }

    pub async fn from_adapter(adapter: wgpu::Adapter) -> Result<Self> {
        Self::from_adapter_with(adapter, ContextOptions::default()).await
    }

    pub async fn from_adapter_with(
        adapter: wgpu::Adapter,
        options: ContextOptions,
    ) -> Result<Self> {
        options.tuning.check()?;
        // The experimental features only when the tuning asks for the kernel that uses them.
        let wanted = if options.tuning.matmul_coop == Some(1) {
            OPTIONAL_FEATURES | NATIVE_EXPERIMENTAL_FEATURES
        } else {
            OPTIONAL_FEATURES
        };
        let features = adapter.features() & wanted;
        let mut desc = wgpu::DeviceDescriptor {
            label: Some("fuselm"),
            required_features: features,
            required_limits: adapter.limits(),
            ..Default::default()
        };
        if features.intersects(NATIVE_EXPERIMENTAL_FEATURES) {
            // SAFETY: wgpu requires this token for its experimental features. The one requested
            // (only with `matmul_coop` 1), cooperative matrices, is used by one kernel
            // (shaders/matmul_coop.wgsl), compiled only where `coop_matrix_f16` and
            // `kernels::matmul` find the configuration and workgroup memory it uses, and held
            // to the same CPU references as the SIMT tiles on the GPU machine (`bench/gpu test
            // kernel_matmul`). The SPIR-V of every other module is unchanged by the feature
            // (Naga switches to the Vulkan memory model only in a module that uses cooperative
            // types). Not guaranteed, and why the tile stays opt-in: in that module Naga 30's
            // workgroup barriers carry no MakeAvailable/MakeVisible semantics and its
            // workgroup accesses are not NonPrivate, so under the Vulkan memory model the
            // barriers formally order nothing; the H200's driver gives the exact results.
            desc.experimental_features = unsafe { wgpu::ExperimentalFeatures::enabled() };
        }
        // In a browser wgpu cannot ask for `subgroups` (web/sys/subgroups.rs says why).
        #[cfg(target_arch = "wasm32")]
        let request = crate::web::sys::subgroups::request_device(&adapter, &desc);
        #[cfg(not(target_arch = "wasm32"))]
        let request = adapter.request_device(&desc);
        let (device, queue) = request.await.map_err(|e| FuselmError::DeviceRequest {
            reason: e.to_string(),
        })?;
        #[cfg(target_arch = "wasm32")]
        let subgroups = crate::web::sys::subgroups::has_subgroups(&device);
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
        // wgpu's handles are Send and Sync natively, not on wasm32 (one thread there).
        #[allow(clippy::arc_with_non_send_sync)]
        let shared = Arc::new(DeviceShared {
            device: device.clone(),
            subgroups,
            lost,
            unproven: Mutex::new(Vec::new()),
            assumed: Mutex::new(Default::default()),
            pipelines: Mutex::new(Default::default()),
            compiled: Default::default(),
        });
        Ok(Self {
            adapter,
            device,
            queue,
            info,
            identity,
            shared,
            options,
            buffers: Mutex::new(Vec::new()),
            compiled: Default::default(),
        })
    }

    /// Another context on this context's device, with `options` and buffers of its own: for a
    /// second model on the same device, or a later load reusing the pipelines compiled for an
    /// earlier one (refused with "invalid-argument" when a tuning value is out of range).
    pub fn sibling(&self, options: ContextOptions) -> Result<Self> {
        options.tuning.check()?;
        Ok(Self {
            adapter: self.adapter.clone(),
            device: self.device.clone(),
            queue: self.queue.clone(),
            info: self.info.clone(),
            identity: self.identity.clone(),
            shared: Arc::clone(&self.shared),
            options,
            buffers: Mutex::new(Vec::new()),
            compiled: Default::default(),
        })
    }

    /// A buffer that this context destroys when it is dropped (or at [`GpuContext::release`]).
    pub fn create_buffer(&self, desc: &wgpu::BufferDescriptor<'_>) -> wgpu::Buffer {
        self.track(self.device.create_buffer(desc))
    }

    /// [`GpuContext::create_buffer`] with its contents.
    pub fn create_buffer_init(&self, desc: &wgpu::util::BufferInitDescriptor<'_>) -> wgpu::Buffer {
        use wgpu::util::DeviceExt;
        self.track(self.device.create_buffer_init(desc))
    }

    fn track(&self, buffer: wgpu::Buffer) -> wgpu::Buffer {
        if let Ok(mut list) = self.buffers.lock() {
            list.push(buffer.clone());
        }
        buffer
    }

    /// Destroys `buffer` now (one made through this context that its owner replaces).
    pub fn release(&self, buffer: &wgpu::Buffer) {
        if let Ok(mut list) = self.buffers.lock() {
            list.retain(|b| b != buffer);
        }
        buffer.destroy();
    }

    /// How many buffers this context holds (made and not yet released).
    pub fn buffers_held(&self) -> usize {
        self.buffers.lock().map(|l| l.len()).unwrap_or(0)
    }

    /// Bytes of the buffers this context holds (made and not yet released).
    pub fn bytes_held(&self) -> u64 {
        self.buffers
            .lock()
            .map(|l| l.iter().map(wgpu::Buffer::size).sum())
            .unwrap_or(0)
    }

    /// The pipeline compiled from `key` on this device, compiled by `compile` on first use.
    pub async fn cached_pipeline<F, Fut>(
        &self,
        key: PipelineKey,
        compile: F,
    ) -> Result<CachedPipeline>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<CachedPipeline>>,
    {
        if let Some(hit) = self
            .shared
            .pipelines
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned())
        {
            return Ok(hit);
        }
        let made = compile().await?;
        for counter in [&self.shared.compiled, &self.compiled] {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if let Ok(mut map) = self.shared.pipelines.lock() {
            map.insert(key, made.clone());
        }
        Ok(made)
    }

    /// Pipelines compiled on this device so far, by every context on it (each key once).
    pub fn device_pipelines_compiled(&self) -> usize {
        self.shared
            .compiled
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Pipelines this context compiled; those it took from the device's cache (compiled for
    /// an earlier context on the device) are not counted.
    pub fn pipelines_compiled(&self) -> usize {
        self.compiled.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Why the device was lost, if it was (then every GPU operation fails: load the model again).
    pub fn lost(&self) -> Option<String> {
        self.shared.lost.lock().ok().and_then(|slot| slot.clone())
    }

    /// `err` as [`FuselmError::DeviceLost`] when the device is gone (a failed map or validation
    /// error is then only a symptom), else unchanged.
    pub fn explain(&self, err: FuselmError) -> FuselmError {
        match self.lost() {
            Some(why) if !matches!(err, FuselmError::DeviceLost(_)) => FuselmError::DeviceLost(why),
            _ => err,
        }
    }

    /// The options this context was created with.
    pub fn options(&self) -> &ContextOptions {
        &self.options
    }

    /// The kernels' launch-parameter overrides (none by default).
    pub fn tuning(&self) -> &KernelTuning {
        &self.options.tuning
    }

    pub fn has(&self, feature: wgpu::Features) -> bool {
        self.device.features().contains(feature)
    }

    /// Whether kernels may reduce a 32-lane row with subgroup operations: the device has
    /// subgroups and they are always exactly 32 wide (NVIDIA, Apple), so a row of 32
    /// consecutive invocations is one subgroup. [`ContextOptions::no_subgroups`] turns them off
    /// (to compare both paths on one device).
    pub fn subgroups32(&self) -> bool {
        if self.options.no_subgroups {
            return false;
        }
        self.shared.subgroups
            && self.info.subgroup_min_size == 32
            && self.info.subgroup_max_size == 32
    }

    /// Whether the device has what the cooperative-matrix prefill tile needs
    /// (`shaders/matmul_coop.wgsl`; its workgroup memory is checked by `kernels::matmul`):
    /// cooperative matrices with 16 x 16 x 16 f16 inputs and an f32 accumulator, shader-f16,
    /// and subgroups exactly 32 wide ([`GpuContext::subgroups32`]: the kernel's four subgroups
    /// of a workgroup of 128 share rows and tokens by shuffles). Natively only (wgpu has no
    /// cooperative matrices in browsers).
    pub fn coop_matrix_f16(&self) -> bool {
        #[cfg(target_arch = "wasm32")]
        {
            false
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            use wgpu::{CooperativeScalarType as T, Features as F};
            self.has(F::EXPERIMENTAL_COOPERATIVE_MATRIX | F::SHADER_F16)
                && self.subgroups32()
                && self
                    .adapter
                    .cooperative_matrix_properties()
                    .iter()
                    .any(|c| {
                        (c.m_size, c.n_size, c.k_size) == (16, 16, 16)
                            && c.ab_type == T::F16
                            && c.cr_type == T::F32
                    })
        }
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
    /// Natively the source is parsed with Naga and [`loop_proof::prove`] checks that every loop
    /// of every function terminates (counted loops whose counter nothing else writes, whose
    /// step is at least 1 and whose bound cannot let the counter wrap; the module docs list
    /// the accepted forms and the one assumption, uniform parameters below 2^31). A proved
    /// module is compiled from that parsed module without Naga's forced loop bounding: Naga
    /// otherwise threads a 64-bit countdown through every loop (a guard against infinite loops,
    /// which drivers may treat as unreachable), and that stops the driver from unrolling the
    /// kernels' constant-trip loops and keeping their small arrays in registers: on an H200 the
    /// fused decode step went from 1,000 to 690 µs without it (bench/NOTES.md). Every other
    /// runtime check wgpu has stays on, bounds checks included: no setting turns them off.
    /// A module the prover cannot prove is compiled with all of wgpu's checks (forced loop
    /// bounding on) and recorded in [`GpuContext::unproven_loops`];
    /// [`ContextOptions::force_loop_bounding`] compiles every module that way, to measure it.
    /// Browsers compile WGSL themselves and apply their own checks: there the source goes to
    /// the browser unchanged.
    pub async fn shader(&self, label: &str, source: &str) -> Result<wgpu::ShaderModule> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        #[cfg(target_arch = "wasm32")]
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
        #[cfg(not(target_arch = "wasm32"))]
        let module = {
            let parsed = naga::front::wgsl::parse_str(source).map_err(|e| {
                FuselmError::Gpu(format!("shader {label}: {}", e.emit_to_string(source)))
            })?;
            let proof =
                loop_proof::prove(&parsed, &loop_proof::ProofLimits::of(&self.device.limits()));
            match &proof {
                Ok(proof) => {
                    if let Ok(mut set) = self.shared.assumed.lock() {
                        set.extend(proof.assumptions.iter().map(|a| format!("{label}: {a}")));
                    }
                }
                Err(why) => {
                    if let Ok(mut list) = self.shared.unproven.lock() {
                        list.push(format!("{label}: {}", why.describe(Some(source))));
                    }
                }
            }
            let desc = wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Naga(std::borrow::Cow::Owned(parsed)),
            };
            if proof.is_ok() && !self.options.force_loop_bounding {
                // SAFETY: `create_shader_module_trusted` with every runtime check but forced
                // loop bounding requires that no loop of the module is infinite.
                // `loop_proof::prove` has just proved, on this very module, that every loop
                // of every function terminates, given that the u32 values the module reads
                // from uniform buffers as loop bounds are below `loop_proof::PARAM_LIMIT`
                // (2^31): the host derives them from model shapes that `check_fit` limits to
                // below 2^31, and tests/loop_proof.rs checks which fields the proofs rely on.
                unsafe {
                    self.device
                        .create_shader_module_trusted(desc, shader_checks())
                }
            } else {
                self.device.create_shader_module(desc)
            }
        };
        match scope.pop().await {
            Some(e) => Err(FuselmError::Gpu(format!("shader {label}: {e}"))),
            None => Ok(module),
        }
    }

    /// The fuselm modules (`label: function, loop, reason`) whose loops the prover could not
    /// prove terminate, so [`GpuContext::shader`] compiled them with all of wgpu's checks
    /// (native only; always empty in a browser).
    pub fn unproven_loops(&self) -> Vec<String> {
        self.shared
            .unproven
            .lock()
            .map(|list| list.clone())
            .unwrap_or_default()
    }

    /// The uniform fields (`label: global.member`) whose values the loop proofs of the modules
    /// compiled so far assumed below `loop_proof::PARAM_LIMIT` (2^31), for tests to check
    /// against what the host writes there (native only).
    pub fn loop_assumptions(&self) -> Vec<String> {
        self.shared
            .assumed
            .lock()
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
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

/// The runtime checks a module whose loops are proved to terminate is compiled with: all of
/// wgpu's, less forced loop bounding (see [`GpuContext::shader`]).
#[cfg(not(target_arch = "wasm32"))]
fn shader_checks() -> wgpu::ShaderRuntimeChecks {
    wgpu::ShaderRuntimeChecks {
        force_loop_bounding: false,
        ..wgpu::ShaderRuntimeChecks::checked()
    }
}
