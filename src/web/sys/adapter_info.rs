//! What the browser's adapter says and wgpu's WebGPU backend does not keep: `GPUAdapterInfo`'s
//! strings (wgpu keeps only the description) and whether it has `subgroups` (a feature wgpu
//! does not map). We ask `navigator.gpu` directly (through `Reflect`, to need no unstable web-sys
//! APIs).

use super::subgroups::features_have;
use crate::probe::describe::WebAdapterInfo;
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

/// The browser adapter's info strings and whether it offers `subgroups`, from one request.
pub struct WebAdapter {
    pub info: Option<WebAdapterInfo>,
    pub subgroups: bool,
}

pub async fn adapter() -> Option<WebAdapter> {
    let adapter = browser_adapter().await?;
    Some(WebAdapter {
        info: adapter_info(&adapter),
        subgroups: features_have(&adapter, "subgroups"),
    })
}

fn adapter_info(adapter: &JsValue) -> Option<WebAdapterInfo> {
    let info = get(adapter, "info")?;
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
