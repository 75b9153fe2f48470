//! `loadModel` and the `Model` class: a [`TextModel`] owned by JS.
//!
//! The model lives in an `Rc<RefCell<…>>`: `generate` clones the `Rc` into the returned promise's
//! future, so neither the JS object nor a wasm-bindgen borrow of it is held across awaits. That
//! keeps `free()` safe during a generation (the model is dropped when the generation ends) and
//! lets the `RefCell` itself be the one-generation-at-a-time lock: a second `generate` finds it
//! borrowed and rejects with kind "busy" instead of panicking.

use super::{from_js, to_js, to_js_error};
use crate::error::FuselmError;
use crate::gpu::GpuContext;
use crate::model::{GenerateOptions, GenerateResult, LoadOptions, TextModel};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use tsify::Ts;
use wasm_bindgen::prelude::*;

/// What a loaded model is: its hyper-parameters and the KV-cache capacity it was loaded with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, tsify::Tsify)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// `general.architecture` ("llama", "qwen2", …).
    pub architecture: String,
    pub layers: u32,
    /// Width of the hidden state (`n_embd`).
    pub embedding_length: u32,
    pub feed_forward_length: u32,
    pub heads: u32,
    /// Key/value heads (fewer than `heads` with grouped-query attention).
    pub kv_heads: u32,
    pub head_dim: u32,
    pub vocab_size: u32,
    /// The context length the model was trained for.
    pub context_length: u32,
    /// KV-cache capacity in tokens of this load: prompt + generated tokens must fit.
    pub n_ctx: u32,
    /// The output head reuses the token embedding.
    pub tied_output: bool,
}

impl ModelInfo {
    fn of(model: &mut TextModel) -> Self {
        let n_ctx = model.gpu().n_ctx();
        let c = model.config();
        Self {
            architecture: c.arch.clone(),
            layers: c.n_layers,
            embedding_length: c.n_embd,
            feed_forward_length: c.n_ff,
            heads: c.n_head,
            kv_heads: c.n_head_kv,
            head_dim: c.head_dim,
            vocab_size: c.vocab_size,
            context_length: c.context_length,
            n_ctx,
            tied_output: c.tied_output,
        }
    }
}

// wasm-bindgen declares `[Symbol.dispose](): void` on every exported class, which only type-checks
// with TypeScript's `esnext.disposable` lib: consumers on an ES2022 lib (and this package's own
// build) would fail. So the class's declaration is written here, without it; the runtime still
// defines `Symbol.dispose` where the browser has it. Keep it in step with the methods below (the
// `.d.ts` snapshot and the TS wrapper in js/model.ts check it).
#[wasm_bindgen(typescript_custom_section)]
const MODEL_TS: &str = r#"
/**
 * A model loaded on the GPU. Call `free()` to release its GPU memory.
 */
export class Model {
    private constructor();
    free(): void;
    /**
     * Generation from `prompt`: greedy by default, sampled with `temperature` and the other
     * sampling options; `strategy` "fused" (default) or "unfused". Rejects with kind "busy"
     * while another generation of this model runs, "limit-exceeded" when prompt + `maxTokens`
     * exceed `nCtx`, "invalid-argument" for an out-of-range setting.
     */
    generate(prompt: string, options?: GenerateOptions | null): Promise<GenerateResult>;
    /**
     * The model's hyper-parameters and KV-cache capacity. Available during a generation too.
     */
    info(): ModelInfo;
}"#;

/// A model loaded on the GPU. Call `free()` to release its GPU memory.
#[wasm_bindgen(skip_typescript)]
pub struct Model {
    inner: Rc<RefCell<TextModel>>,
    info: ModelInfo,
}

/// Parses a whole GGUF file, builds its tokenizer and chat template and uploads it to the GPU.
/// Rejects with kind "invalid-model" for a file that is not a supported GGUF, and the GPU kinds
/// ("webgpu-unavailable", "no-adapter", "limit-exceeded", …) when it cannot run.
#[wasm_bindgen(js_name = loadModel)]
pub async fn load_model(
    bytes: Vec<u8>,
    options: Option<Ts<LoadOptions>>,
) -> Result<Model, JsValue> {
    let options = from_js(options)?.unwrap_or_default();
    let ctx = GpuContext::new().await.map_err(to_js_error)?;
    let mut model = TextModel::load(ctx, &bytes, &options)
        .await
        .map_err(to_js_error)?;
    drop(bytes);
    let info = ModelInfo::of(&mut model);
    Ok(Model {
        inner: Rc::new(RefCell::new(model)),
        info,
    })
}

#[wasm_bindgen]
impl Model {
    /// Generation from `prompt`: greedy by default, sampled with `temperature` and the other
    /// sampling options; `strategy` "fused" (default) or "unfused". Rejects with kind "busy"
    /// while another generation of this model runs, "limit-exceeded" when prompt + `maxTokens`
    /// exceed `nCtx`, "invalid-argument" for an out-of-range setting.
    pub fn generate(
        &self,
        prompt: String,
        options: Option<Ts<GenerateOptions>>,
    ) -> js_sys::Promise {
        let inner = Rc::clone(&self.inner);
        let options = from_js(options);
        wasm_bindgen_futures::future_to_promise(async move {
            let options = options?.unwrap_or_default();
            let result = generate(&inner, &prompt, &options)
                .await
                .map_err(to_js_error)?;
            Ok(to_js(&result)?.into())
        })
    }

    /// The model's hyper-parameters and KV-cache capacity. Available during a generation too.
    pub fn info(&self) -> Result<Ts<ModelInfo>, JsValue> {
        to_js(&self.info)
    }
}

// The RefMut held across the awaits is the busy lock (see the module comment); every other access
// uses `try_borrow*`, so holding it can only make another call reject, never panic.
#[allow(clippy::await_holding_refcell_ref)]
async fn generate(
    inner: &RefCell<TextModel>,
    prompt: &str,
    options: &GenerateOptions,
) -> Result<GenerateResult, FuselmError> {
    let mut model = inner.try_borrow_mut().map_err(|_| {
        FuselmError::Busy(
            "this model is already generating; await the running generate() first".into(),
        )
    })?;
    model.generate(prompt, options, &mut |_| true).await
}
