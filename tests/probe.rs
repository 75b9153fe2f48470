//! `probe()` against what wgpu itself says about the adapter, natively and in the browser.

mod common;

use fuselm::probe::{feature_names, probe_adapter, ProbeOptions, TimerKind};

/// Whether the browser's own adapter (`navigator.gpu.requestAdapter()`) has WebGPU's
/// `subgroups`, asked directly: wgpu's WebGPU backend does not map that feature.
#[cfg(target_arch = "wasm32")]
async fn browser_adapter_has_subgroups() -> bool {
    use js_sys::Reflect;
    use wasm_bindgen::JsCast;
    let get = |t: &wasm_bindgen::JsValue, k: &str| Reflect::get(t, &k.into()).expect(k);
    let gpu = get(&get(&js_sys::global(), "navigator"), "gpu");
    let request: js_sys::Function = get(&gpu, "requestAdapter").dyn_into().unwrap();
    let promise: js_sys::Promise = request.call0(&gpu).unwrap().dyn_into().unwrap();
    let adapter = wasm_bindgen_futures::JsFuture::from(promise).await.unwrap();
    let features = get(&adapter, "features");
    let has: js_sys::Function = get(&features, "has").dyn_into().unwrap();
    has.call1(&features, &"subgroups".into())
        .unwrap()
        .is_truthy()
}

async fn report_matches_adapter() {
    let adapter = fuselm::gpu::request_adapter().await.expect("an adapter");
    #[allow(unused_mut)]
    let (info, limits, mut features) = (adapter.get_info(), adapter.limits(), adapter.features());
    #[cfg(target_arch = "wasm32")]
    if browser_adapter_has_subgroups().await {
        features |= wgpu::Features::SUBGROUP;
    }
    let report = probe_adapter(adapter, &ProbeOptions::default())
        .await
        .expect("probe");

    let l = &report.limits;
    assert_eq!(
        l.max_storage_buffer_binding_size,
        limits.max_storage_buffer_binding_size
    );
    assert_eq!(l.max_buffer_size, limits.max_buffer_size);
    assert_eq!(
        l.max_compute_workgroup_storage_size,
        limits.max_compute_workgroup_storage_size
    );
    assert_eq!(
        l.max_compute_invocations_per_workgroup,
        limits.max_compute_invocations_per_workgroup
    );
    assert_eq!(
        l.max_compute_workgroup_size_x,
        limits.max_compute_workgroup_size_x
    );
    assert_eq!(
        l.max_compute_workgroups_per_dimension,
        limits.max_compute_workgroups_per_dimension
    );
    assert_eq!(
        l.max_storage_buffers_per_shader_stage,
        limits.max_storage_buffers_per_shader_stage
    );
    assert_eq!(
        l.min_storage_buffer_offset_alignment,
        limits.min_storage_buffer_offset_alignment
    );

    // The WebGPU spec's default limits.
    let d = &report.webgpu_defaults;
    assert_eq!(d.max_storage_buffer_binding_size, 128 << 20);
    assert_eq!(d.max_buffer_size, 256 << 20);
    assert_eq!(d.max_compute_workgroup_storage_size, 16384);
    assert_eq!(d.max_compute_invocations_per_workgroup, 256);
    assert_eq!(d.max_storage_buffers_per_shader_stage, 8);
    assert_eq!(d.max_compute_workgroups_per_dimension, 65535);

    let f = &report.features;
    assert_eq!(f.shader_f16, features.contains(wgpu::Features::SHADER_F16));
    assert_eq!(f.subgroups, features.contains(wgpu::Features::SUBGROUP));
    assert_eq!(
        f.timestamp_query,
        features.contains(wgpu::Features::TIMESTAMP_QUERY)
    );
    assert_eq!(f.all, feature_names(features));
    if f.subgroups {
        assert_eq!(f.subgroup_min_size, info.subgroup_min_size);
        assert_eq!(f.subgroup_max_size, info.subgroup_max_size);
        assert!(f.subgroup_min_size >= 4 && f.subgroup_min_size <= f.subgroup_max_size);
    }

    let fit = &report.fit;
    let tensor = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size);
    assert_eq!(fit.max_tensor_bytes, tensor);
    let weight_bindings =
        u64::from(limits.max_storage_buffers_per_shader_stage - fit.reserved_bindings);
    assert_eq!(fit.max_weight_bytes_per_dispatch, weight_bindings * tensor);
    assert_eq!(fit.f16_kernels, f.shader_f16);
    assert_eq!(
        fit.max_resident_dim_f32,
        limits.max_compute_workgroup_storage_size / 8
    );
    assert!(report.bench.is_none(), "no benchmarks unless asked");

    // Both test machines are software adapters: lavapipe natively, SwiftShader in Chromium.
    let a = &report.adapter;
    assert!(a.is_software, "{a:?}");
    if cfg!(target_arch = "wasm32") {
        assert_eq!(a.backend, "webgpu");
        assert_eq!(a.architecture, "swiftshader", "{a:?}");
    } else {
        assert_eq!(a.backend, info.backend.to_str());
        assert_eq!(a.device, info.name);
        assert_eq!(a.vendor, format!("{:#06x}", info.vendor));
    }
}
gpu_test!(
    report_matches_adapter_limits_and_features,
    report_matches_adapter
);

async fn bench_measures_each_cost() {
    let adapter = fuselm::gpu::request_adapter().await.expect("an adapter");
    let has_timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
    let options = ProbeOptions {
        bench: Some(true),
        bench_bytes: Some(8 << 20),
        runs: Some(3),
    };
    let report = probe_adapter(adapter, &options)
        .await
        .expect("probe with bench");
    let b = report.bench.expect("bench requested");
    assert_eq!(b.read_bytes, 8 << 20);
    assert_eq!(b.many_workgroups, 1024);
    for (name, m, unit) in [
        ("dependent dispatch", &b.dependent_dispatch, "us"),
        ("submit+readback", &b.submit_and_readback, "us"),
        ("read 1 wg", &b.read_bandwidth_one_workgroup, "GB/s"),
        ("read many wg", &b.read_bandwidth_many_workgroups, "GB/s"),
    ] {
        assert_eq!(m.samples.len(), 3, "{name}");
        assert_eq!(m.unit, unit, "{name}");
        assert!(m.min <= m.median && m.median <= m.max, "{name}: {m:?}");
        assert!(m.median.is_finite() && m.median > 0.0, "{name}: {m:?}");
    }
    assert_eq!(b.submit_and_readback.timer, TimerKind::WallClock);
    if !has_timestamps {
        assert_eq!(b.read_bandwidth_one_workgroup.timer, TimerKind::WallClock);
    }
    // A round trip to the host costs more than one more dispatch in an open pass: the premise of
    // fusing a whole generation into one pass.
    assert!(
        b.submit_and_readback.median > b.dependent_dispatch.median,
        "{:?} vs {:?}",
        b.submit_and_readback,
        b.dependent_dispatch
    );
}
gpu_test!(
    bench_measures_dispatch_roundtrip_and_bandwidth,
    bench_measures_each_cost
);

async fn no_backend_is_a_typed_error() {
    let err = fuselm::gpu::request_adapter_with(wgpu::Backends::empty())
        .await
        .expect_err("no backend, no adapter");
    assert_eq!(err.kind(), fuselm::error::ErrorKind::NoAdapter, "{err}");
}
gpu_test!(no_adapter_yields_typed_error, no_backend_is_a_typed_error);
