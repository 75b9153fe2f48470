//! Values and errors across the JS boundary: tsify `Ts<T>` in and out, and a core error as a JS
//! `Error` named `FuselmError` with its `kind`.

use crate::error::FuselmError;
use tsify::Ts;
use wasm_bindgen::prelude::*;

/// Converts a core error into a JS `Error` with `name = "FuselmError"` and a `kind` field.
pub(super) fn to_js_error(err: FuselmError) -> JsValue {
    let js = js_sys::Error::new(&err.to_string());
    js.set_name("FuselmError");
    let set = |key: &str, value: JsValue| {
        let _ = js_sys::Reflect::set(&js, &key.into(), &value);
    };
    set("kind", err.kind().as_str().into());
    let limit = match &err {
        FuselmError::LimitExceeded {
            limit,
            needed,
            available,
        } => Some((*limit, *needed, *available)),
        FuselmError::MemoryBudget {
            needed, available, ..
        } => Some(("memoryBudget", *needed, *available)),
        _ => None,
    };
    if let Some((limit, needed, available)) = limit {
        set("limit", limit.into());
        set("needed", (needed as f64).into());
        set("available", (available as f64).into());
    }
    js.into()
}

pub(super) fn from_js<T: tsify::Tsify + serde::de::DeserializeOwned>(
    value: Option<Ts<T>>,
) -> Result<Option<T>, JsValue>
where
    <T as tsify::Tsify>::JsType: JsCast + Clone,
{
    value
        .map(|v| v.to_rust())
        .transpose()
        .map_err(|e| to_js_error(FuselmError::InvalidArgument(e.to_string())))
}

pub(super) fn to_js<T: tsify::Tsify + serde::Serialize>(value: &T) -> Result<Ts<T>, JsValue>
where
    <T as tsify::Tsify>::JsType: JsCast + Clone,
{
    Ts::from_rust(value).map_err(|e| to_js_error(FuselmError::Gpu(format!("serialize: {e}"))))
}
