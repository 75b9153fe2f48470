//! The JS facade: the only module that knows about wasm-bindgen, compiled only for wasm32.
//!
//! Each export is a thin async wrapper over the native core; `sys` holds the few browser calls
//! the core itself makes on wasm32 (clock, adapter info, the subgroups request). Values cross the boundary as tsify
//! `Ts<T>` (typed in the `.d.ts`, converted inside the function so nothing leaks on error).
//! Errors cross as JS `Error` objects named `FuselmError` carrying a stable `kind` (see
//! [`FuselmError::kind`]); `js/errors.ts` turns them into the npm package's `FuselmError` class.

mod model;
mod sim;
pub(crate) mod sys;

pub use model::{create_model_loader, load_model, Model, ModelInfo, ModelLoader};
pub use sim::{create_simulation, sim_bench_js, Simulation};

use crate::error::FuselmError;
use crate::probe::{AdapterReport, ProbeOptions};
use tsify::Ts;
use wasm_bindgen::prelude::*;

/// Converts a core error into a JS `Error` with `name = "FuselmError"` and a `kind` field.
pub(crate) fn to_js_error(err: FuselmError) -> JsValue {
    let js = js_sys::Error::new(&err.to_string());
    js.set_name("FuselmError");
    let set = |key: &str, value: JsValue| {
        let _ = js_sys::Reflect::set(&js, &key.into(), &value);
    };
    set("kind", err.kind().as_str().into());
    if let FuselmError::LimitExceeded {
        limit,
        needed,
        available,
    } = &err
    {
        set("limit", (*limit).into());
        set("needed", (*needed as f64).into());
        set("available", (*available as f64).into());
    }
    js.into()
}

fn from_js<T: tsify::Tsify + serde::de::DeserializeOwned>(
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

fn to_js<T: tsify::Tsify + serde::Serialize>(value: &T) -> Result<Ts<T>, JsValue>
where
    <T as tsify::Tsify>::JsType: JsCast + Clone,
{
    Ts::from_rust(value).map_err(|e| to_js_error(FuselmError::Gpu(format!("serialize: {e}"))))
}

/// Probes the user's GPU adapter. See `AdapterReport`.
#[wasm_bindgen(js_name = probe)]
pub async fn probe_js(options: Option<Ts<ProbeOptions>>) -> Result<Ts<AdapterReport>, JsValue> {
    let options = from_js(options)?.unwrap_or_default();
    let report = crate::probe::probe(&options).await.map_err(to_js_error)?;
    to_js(&report)
}

/// Runs every strategy side by side (see `GenerationBenchReport`): the GGUF `model` if given (its bytes),
/// and the synthetic toy grid when `options.toy` is set or there is no model.
#[wasm_bindgen(js_name = bench)]
pub async fn bench_js(
    options: Option<Ts<crate::model::bench::GenerationBenchOptions>>,
    model: Option<Vec<u8>>,
) -> Result<Ts<crate::model::bench::GenerationBenchReport>, JsValue> {
    let options = from_js(options)?.unwrap_or_default();
    let report = crate::model::bench::bench(model.as_deref(), &options)
        .await
        .map_err(to_js_error)?;
    to_js(&report)
}
