//! `probe()`: what the user's GPU adapter can do, before any model is downloaded.
//!
//! The report lists identity, features and the limits that decide model fit (next to the WebGPU
//! defaults), derives the answers a user needs (largest tensor, f16/subgroup kernels, largest
//! dimension a single-workgroup kernel keeps resident) and, on request, measures the dispatch,
//! round-trip and bandwidth costs fuselm's fused design is built around.

mod bench;
pub(crate) mod describe;
mod report;
pub mod timer;

pub use describe::{feature_names, RESERVED_BINDINGS};
pub use report::*;

use crate::error::Result;
use crate::gpu::{request_adapter, GpuContext};

/// Who the adapter is: wgpu's info, completed in browsers with `GPUAdapterInfo`'s strings (wgpu
/// keeps only the description), and whether it is a software (CPU) implementation.
pub async fn identify(info: &wgpu::AdapterInfo) -> AdapterIdentity {
    #[cfg(target_arch = "wasm32")]
    let web = crate::web::sys::adapter_info::adapter()
        .await
        .and_then(|a| a.info);
    #[cfg(not(target_arch = "wasm32"))]
    let web = None;
    describe::identity(info, web)
}

/// Probes the default (high-performance) adapter.
pub async fn probe(options: &ProbeOptions) -> Result<AdapterReport> {
    let adapter = request_adapter().await?;
    probe_adapter(adapter, options).await
}

/// Probes a given adapter. A device is created only when benchmarks are asked for.
pub async fn probe_adapter(
    adapter: wgpu::Adapter,
    options: &ProbeOptions,
) -> Result<AdapterReport> {
    let info = adapter.get_info();
    #[allow(unused_mut)]
    let mut adapter_features = adapter.features();
    // wgpu's WebGPU backend does not know `subgroups`; the browser's adapter says.
    #[cfg(target_arch = "wasm32")]
    let identity = {
        let web = crate::web::sys::adapter_info::adapter().await;
        if web.as_ref().is_some_and(|w| w.subgroups) {
            adapter_features |= wgpu::Features::SUBGROUP;
        }
        describe::identity(&info, web.and_then(|w| w.info))
    };
    #[cfg(not(target_arch = "wasm32"))]
    let identity = describe::identity(&info, None);
    let features = describe::features(adapter_features, &info);
    let limits = report::AdapterLimits::from(&adapter.limits());
    let fit = describe::fit(&limits, &features);
    let mut report = AdapterReport {
        adapter: identity,
        features,
        limits,
        webgpu_defaults: describe::webgpu_defaults(),
        fit,
        bench: None,
    };
    if options.bench.unwrap_or(false) {
        let ctx = GpuContext::from_adapter(adapter).await?;
        report.bench = Some(bench::run(&ctx, options).await?);
    }
    Ok(report)
}
