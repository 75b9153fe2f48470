//! The `probe` export: the user's GPU adapter.

use super::convert::{from_js, to_js, to_js_error};
use crate::probe::{AdapterReport, ProbeOptions};
use tsify::Ts;
use wasm_bindgen::prelude::*;

/// Probes the user's GPU adapter. See `AdapterReport`.
#[wasm_bindgen(js_name = probe)]
pub async fn probe_js(options: Option<Ts<ProbeOptions>>) -> Result<Ts<AdapterReport>, JsValue> {
    let options = from_js(options)?.unwrap_or_default();
    let report = crate::probe::probe(&options).await.map_err(to_js_error)?;
    to_js(&report)
}
