//! The browser's `GPUAdapterInfo` strings. wgpu's WebGPU backend keeps only the description, so
//! we ask `navigator.gpu` directly (through `Reflect`, to need no unstable web-sys APIs).

use super::describe::WebAdapterInfo;
use js_sys::Reflect;
use wasm_bindgen::{JsCast, JsValue};

fn get(target: &JsValue, key: &str) -> Option<JsValue> {
    Reflect::get(target, &JsValue::from_str(key))
        .ok()
        .filter(|v| !v.is_undefined() && !v.is_null())
}

/// The browser's high-performance adapter (the one wgpu gets too).
async fn browser_adapter() -> Option<JsValue> {
    let navigator = get(&js_sys::global(), "navigator")?;
    let gpu = get(&navigator, "gpu")?;
    let request: js_sys::Function = get(&gpu, "requestAdapter")?.dyn_into().ok()?;
    let options = js_sys::Object::new();
    Reflect::set(
        &options,
        &"powerPreference".into(),
        &"high-performance".into(),
    )
    .ok()?;
    let promise: js_sys::Promise = request.call1(&gpu, &options).ok()?.dyn_into().ok()?;
    wasm_bindgen_futures::JsFuture::from(promise).await.ok()
}

/// Whether the browser's adapter offers the WebGPU feature `name` (wgpu's WebGPU backend maps
/// only some features, `subgroups` not among them).
pub async fn adapter_has(name: &str) -> bool {
    let Some(adapter) = browser_adapter().await else {
        return false;
    };
    let Some(features) = get(&adapter, "features") else {
        return false;
    };
    get(&features, "has")
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .and_then(|f| f.call1(&features, &name.into()).ok())
        .is_some_and(|v| v.is_truthy())
}

pub async fn adapter_info() -> Option<WebAdapterInfo> {
    let adapter = browser_adapter().await?;
    let info = get(&adapter, "info")?;
    let text = |key: &str| {
        get(&info, key)
            .and_then(|v| v.as_string())
            .unwrap_or_default()
    };
    Some(WebAdapterInfo {
        vendor: text("vendor"),
        architecture: text("architecture"),
        device: text("device"),
        description: text("description"),
    })
}
