//! The `bench` export: every generation strategy side by side.

use super::convert::{from_js, to_js, to_js_error};
use tsify::Ts;
use wasm_bindgen::prelude::*;

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
