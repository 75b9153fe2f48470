//! Subgroups in the browser (wasm32 only). wgpu 30's WebGPU backend maps 16 WebGPU features
//! onto `wgpu::Features` and `subgroups` is not among them: its adapters never report
//! `SUBGROUP`, and it never asks `requestDevice` for `subgroups`, so without this module every
//! browser device ran the workgroup-memory reductions (`reduce_shared.wgsl`) even where the
//! adapter has 32-wide subgroups (Chrome and Dawn on NVIDIA: their absence cost the fused step
//! ~100 µs per token on an H200, bench/NOTES.md).
//!
//! [`request_device`] adds `subgroups` to the one `requestDevice` call that wgpu makes for
//! fuselm's device: for the duration of that synchronous call (wgpu issues it eagerly, before
//! its future is polled) `GPUAdapter.prototype.requestDevice` is a `Proxy` of itself whose
//! `apply` trap adds the feature when the descriptor carries fuselm's label and the adapter has
//! the feature; the original method is back before any other code can run. [`has_subgroups`]
//! then asks the `GPUDevice` itself, since wgpu's `Device::features` cannot report it.

use js_sys::{Array, Function, Object, Proxy, Reflect};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};

const FEATURE: &str = "subgroups";

/// `adapter.request_device(desc)` with `subgroups` added when the adapter offers it; `desc`
/// must carry a label (only that label's request is touched).
pub fn request_device(
    adapter: &wgpu::Adapter,
    desc: &wgpu::DeviceDescriptor<'_>,
) -> impl std::future::Future<Output = Result<(wgpu::Device, wgpu::Queue), wgpu::RequestDeviceError>>
{
    let label = desc.label.unwrap_or_default().to_string();
    let patched = Patch::install(label);
    // wgpu calls GPUAdapter.requestDevice here, synchronously.
    let future = adapter.request_device(desc);
    drop(patched);
    future
}

/// Whether the browser device was created with `subgroups`.
pub fn has_subgroups(device: &wgpu::Device) -> bool {
    let Some(raw) = device.as_webgpu() else {
        return false;
    };
    features_have(raw.as_ref(), FEATURE)
}

/// `target.features.has(name)` for a `GPUAdapter` or `GPUDevice`; false on any failure.
pub fn features_have(target: &JsValue, name: &str) -> bool {
    let Ok(features) = Reflect::get(target, &"features".into()) else {
        return false;
    };
    let Ok(has) = Reflect::get(&features, &"has".into()) else {
        return false;
    };
    has.dyn_into::<Function>()
        .ok()
        .and_then(|f| f.call1(&features, &name.into()).ok())
        .is_some_and(|v| v.is_truthy())
}

/// The installed proxy; dropping it puts the original method back.
struct Patch {
    proto: Object,
    original: JsValue,
    _trap: Closure<dyn FnMut(JsValue, JsValue, Array) -> Result<JsValue, JsValue>>,
}

impl Patch {
    /// `None` where there is no `GPUAdapter` class to patch (then nothing changes).
    fn install(label: String) -> Option<Self> {
        let global = js_sys::global();
        let class = Reflect::get(&global, &"GPUAdapter".into()).ok()?;
        let proto: Object = Reflect::get(&class, &"prototype".into())
            .ok()?
            .dyn_into()
            .ok()?;
        let original = Reflect::get(&proto, &"requestDevice".into()).ok()?;
        let original_fn: Function = original.clone().dyn_into().ok()?;
        let trap = Closure::<dyn FnMut(JsValue, JsValue, Array) -> Result<JsValue, JsValue>>::new(
            move |target: JsValue, this: JsValue, args: Array| {
                let target: Function = target.dyn_into()?;
                let desc = args.get(0);
                let ours = desc.is_object()
                    && Reflect::get(&desc, &"label".into())
                        .ok()
                        .and_then(|l| l.as_string())
                        .is_some_and(|l| l == label);
                if ours && features_have(&this, FEATURE) {
                    let copy = Object::assign(&Object::new(), desc.unchecked_ref());
                    let wanted = Array::new();
                    if let Ok(list) = Reflect::get(&desc, &"requiredFeatures".into()) {
                        if !list.is_undefined() {
                            for f in Array::from(&list).iter() {
                                wanted.push(&f);
                            }
                        }
                    }
                    if !wanted.includes(&FEATURE.into(), 0) {
                        wanted.push(&FEATURE.into());
                    }
                    Reflect::set(&copy, &"requiredFeatures".into(), &wanted)?;
                    args.set(0, copy.into());
                }
                Reflect::apply(&target, &this, &args)
            },
        );
        let handler = Object::new();
        Reflect::set(&handler, &"apply".into(), trap.as_ref()).ok()?;
        let proxy = Proxy::new(&original_fn, &handler);
        Reflect::set(&proto, &"requestDevice".into(), &proxy).ok()?;
        Some(Self {
            proto,
            original,
            _trap: trap,
        })
    }
}

impl Drop for Patch {
    fn drop(&mut self) {
        let _ = Reflect::set(&self.proto, &"requestDevice".into(), &self.original);
    }
}
