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

pub async fn adapter_info() -> Option<WebAdapterInfo> {
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
    let adapter = wasm_bindgen_futures::JsFuture::from(promise).await.ok()?;
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
