//! Loading a model from JS: whole bytes (`loadModel`) or a stream (`createModelLoader`), held to
//! the page's `memoryBudget` with what its models and the loads under way hold (`memoryInUse`).

use super::convert::{from_js, to_js, to_js_error};
use super::model::Model;
use crate::error::FuselmError;
use crate::model::{estimate_memory, LoadOptions, LoadStatus, MemoryBudget, TextModel};
use std::cell::RefCell;
use std::rc::Rc;
use tsify::Ts;
use wasm_bindgen::prelude::*;

/// Parses a whole GGUF file, builds its tokenizer and chat template and uploads it to the GPU.
/// Rejects with kind "invalid-model" for a file that is not a supported GGUF, and the GPU kinds
/// ("webgpu-unavailable", "no-adapter", "limit-exceeded", …) when it cannot run.
#[wasm_bindgen(js_name = loadModel)]
pub async fn load_model(
    bytes: Vec<u8>,
    options: Option<Ts<LoadOptions>>,
    memory_budget: Option<f64>,
) -> Result<Model, JsValue> {
    let options = from_js(options)?.unwrap_or_default();
    let budget = budget_bytes(memory_budget)?.map(budget_now);
    let ctx = super::device::context().await.map_err(to_js_error)?;
    if let Some(budget) = budget {
        let gguf = crate::gguf::Gguf::parse(&bytes).map_err(|e| to_js_error(e.into()))?;
        let need = estimate_memory(&ctx, &gguf, &options).map_err(to_js_error)?;
        let config =
            crate::gguf::ModelConfig::from_gguf(&gguf).map_err(|e| to_js_error(e.into()))?;
        let sizes = options
            .sizes(&config, ctx.identity.is_software)
            .map_err(to_js_error)?;
        budget.check(&need, sizes.n_ctx).map_err(to_js_error)?;
    }
    let model = TextModel::load(ctx, &bytes, &options)
        .await
        .map_err(to_js_error)?;
    drop(bytes);
    Ok(Model::new(model))
}

/// A `memoryBudget` option (bytes every model on this device may hold together), checked.
fn budget_bytes(memory_budget: Option<f64>) -> Result<Option<u64>, JsValue> {
    match memory_budget {
        Some(bytes) if !(bytes.is_finite() && bytes >= 0.0) => {
            Err(to_js_error(FuselmError::InvalidArgument(format!(
                "memoryBudget must be a number of bytes (0 or more), got {bytes}"
            ))))
        }
        other => Ok(other.map(|bytes| bytes as u64)),
    }
}

/// The budget of `bytes` as of now: what the page's models and the loads under way hold.
fn budget_now(bytes: u64) -> MemoryBudget {
    MemoryBudget {
        budget: bytes,
        in_use: super::device::in_use(),
    }
}

/// GPU bytes held by the models loaded in this page (or worker) and not yet disposed, with the
/// estimates of the loads under way (from their header on).
#[wasm_bindgen(js_name = memoryInUse)]
pub fn memory_in_use() -> f64 {
    super::device::in_use() as f64
}

/// A loader for a model that arrives in chunks (see `ModelLoader`); `total_bytes`, when the
/// source knows the file's size, lets it allocate each tensor's buffer whole. Rejects with the
/// GPU kinds ("webgpu-unavailable", "no-adapter", …) when there is no usable device.
#[wasm_bindgen(js_name = createModelLoader)]
pub async fn create_model_loader(
    options: Option<Ts<LoadOptions>>,
    total_bytes: Option<f64>,
    memory_budget: Option<f64>,
) -> Result<ModelLoader, JsValue> {
    let options = from_js(options)?.unwrap_or_default();
    let budget = budget_bytes(memory_budget)?;
    let ctx = super::device::context().await.map_err(to_js_error)?;
    let mut loader = crate::model::ModelLoader::new(ctx, options);
    if let Some(bytes) = budget {
        // Taken when the header arrives: loads started meanwhile count.
        loader = loader.with_memory_budget_at(move || budget_now(bytes));
    }
    if let Some(len) = total_bytes.filter(|n| n.is_finite() && *n >= 0.0) {
        loader.expect_len(len as u64);
    }
    Ok(ModelLoader {
        inner: Rc::new(RefCell::new(Some(loader))),
        reservation: Rc::new(RefCell::new(None)),
    })
}

/// A model being loaded from a stream of bytes.
#[wasm_bindgen(skip_typescript)]
pub struct ModelLoader {
    inner: Rc<RefCell<Option<crate::model::ModelLoader>>>,
    /// The header's estimate, counted in `memoryInUse` until the load ends.
    reservation: Rc<RefCell<Option<super::device::Reservation>>>,
}

fn finished() -> JsValue {
    to_js_error(FuselmError::InvalidArgument(
        "this loader has finished (or failed); start a new load".into(),
    ))
}

#[wasm_bindgen]
impl ModelLoader {
    /// Feeds the next bytes. Rejects with "invalid-model", "unsupported-quant" or
    /// "limit-exceeded" as soon as the bytes so far show the model cannot load.
    pub fn push(&self, chunk: &[u8]) -> Result<Ts<LoadStatus>, JsValue> {
        let mut slot = self.inner.try_borrow_mut().map_err(|_| finished())?;
        let loader = slot.as_mut().ok_or_else(finished)?;
        if let Err(e) = loader.push(chunk) {
            *slot = None;
            self.reservation.borrow_mut().take();
            return Err(to_js_error(e));
        }
        let status = loader.status();
        if let (Some(memory), Ok(mut reserved)) =
            (&status.memory, self.reservation.try_borrow_mut())
        {
            if reserved.is_none() {
                *reserved = Some(super::device::Reservation::new(memory.total));
            }
        }
        to_js(status)
    }

    pub fn status(&self) -> Result<Ts<LoadStatus>, JsValue> {
        let slot = self.inner.try_borrow().map_err(|_| finished())?;
        to_js(slot.as_ref().ok_or_else(finished)?.status())
    }

    /// Ends the stream and builds the model (kernels compiled, buffers bound).
    pub fn finish(&self) -> js_sys::Promise {
        let loader = self.inner.try_borrow_mut().ok().and_then(|mut s| s.take());
        let reservation = self
            .reservation
            .try_borrow_mut()
            .ok()
            .and_then(|mut r| r.take());
        wasm_bindgen_futures::future_to_promise(async move {
            let loader = loader.ok_or_else(finished)?;
            let model = loader.finish().await.map_err(to_js_error);
            // The model counts itself from here (or the load failed): the estimate goes.
            let model = model.map(Model::new);
            drop(reservation);
            Ok(model?.into())
        })
    }
}
