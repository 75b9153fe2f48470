//! `createModelLoader` / `ModelLoader` (streaming load) and the `Model` class: a [`TextModel`]
//! owned by JS.
//!
//! The model lives in an `Rc<RefCell<…>>`: `generate` clones the `Rc` into the returned promise's
//! future, so neither the JS object nor a wasm-bindgen borrow of it is held across awaits. That
//! keeps `free()` safe during a generation (the model is dropped when the generation ends) and
//! lets the `RefCell` itself be the one-generation-at-a-time lock: a second `generate` finds it
//! borrowed and rejects with kind "busy" instead of panicking. The tokenizer is shared
//! separately, so `tokenize`/`detokenize` work during a generation.

use super::convert::{from_js, to_js, to_js_error};
use crate::chat_template::ChatMessage;
use crate::constraint::ResponseFormat;
use crate::error::FuselmError;
use crate::model::{
    CalibrateOptions, Calibration, GenerateOptions, GenerateResult, MemoryUse, PreparedFormat,
    Prompt, QuantUse, SessionInfo, Strategy, TextModel,
};
use crate::tokenizer::Tokenizer;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use tsify::Ts;
use wasm_bindgen::prelude::*;

/// What a loaded model is: its hyper-parameters, the KV-cache capacity it was loaded with, its
/// weight formats, the GPU memory it holds and the strategy `generate` uses by default.
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
    /// The model has a chat template (`chat` options and `chat.completions` need one).
    pub chat_template: bool,
    /// Formats of the weight matrices.
    pub quant_types: Vec<QuantUse>,
    /// GPU memory held by this model, in bytes.
    pub memory: MemoryUse,
    /// The GPU adapter it runs on.
    pub adapter: String,
    /// The strategy `generate` uses when none is given.
    pub strategy: Strategy,
    /// Why that strategy, in one sentence.
    pub strategy_reason: String,
    /// GPU pipelines this model compiled so far: models share the page's device and its
    /// compiled pipelines, so loading a model again compiles none (0).
    pub kernels_compiled: u32,
}

impl ModelInfo {
    fn of(model: &mut TextModel) -> Self {
        let has_template = model.has_chat_template();
        let gpu = model.gpu();
        let (strategy, strategy_reason) = gpu.default_strategy();
        let n_ctx = gpu.n_ctx();
        let memory = gpu.memory();
        let quant_types = gpu.quant_types();
        let kernels_compiled = gpu.context().pipelines_compiled() as u32;
        let id = &gpu.context().identity;
        let adapter = [&id.description, &id.device, &id.architecture, &id.vendor]
            .into_iter()
            .find(|s| !s.is_empty())
            .cloned()
            .unwrap_or_default();
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
            chat_template: has_template,
            quant_types,
            memory,
            adapter,
            strategy,
            strategy_reason,
            kernels_compiled,
        }
    }
}

// wasm-bindgen declares `[Symbol.dispose](): void` on every exported class, which only type-checks
// with TypeScript's `esnext.disposable` lib: consumers on an ES2022 lib (and this package's own
// build) would fail. So the classes' declarations are written here, without it; the runtime still
// defines `Symbol.dispose` where the browser has it. Keep them in step with the methods below
// (the `.d.ts` snapshot and the TS wrapper in js/ check them).
#[wasm_bindgen(typescript_custom_section)]
const JSON_SCHEMA_TS: &str = r#"
/** A JSON value. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * A JSON Schema (draft 2020-12 keywords; README.md, "Structured output", lists those that
 * constrain generation — any other is a typed `constraint` error naming it).
 */
export type JsonSchema = boolean | { [keyword: string]: JsonValue };
"#;

#[wasm_bindgen(typescript_custom_section)]
const MODEL_TS: &str = r#"
/**
 * Called for every generated token with the text it releases (possibly "": an incomplete
 * character or a possible stop-sequence start is held back), and once more at the end with
 * `tokenId` undefined for text held back until then. Return `false` to stop the generation.
 */
export type OnToken = (text: string, tokenId: number | undefined) => boolean | void;

/**
 * A model loaded on the GPU (the raw wasm class; the package's `Model` wraps it).
 */
export class Model {
    private constructor();
    free(): void;
    /** Generation from `prompt`; see `GenerateOptions`. `keepGoing()` is asked between prefill
     * batches: `false` stops the generation there (`stopReason` "aborted"). */
    generate(prompt: string, options: GenerateOptions | null | undefined, onToken: OnToken | null | undefined, keepGoing?: (() => boolean) | null): Promise<GenerateResult>;
    /** Generation from a conversation rendered with the model's chat template. */
    chat(messages: ChatMessage[], options: GenerateOptions | null | undefined, onToken: OnToken | null | undefined, keepGoing?: (() => boolean) | null): Promise<GenerateResult>;
    tokenize(text: string, addSpecial: boolean, parseSpecial: boolean): Uint32Array;
    detokenize(ids: Uint32Array): string;
    /** Compiles a response format for this model's vocabulary now and keeps it. */
    prepareResponseFormat(format: ResponseFormat): PreparedFormat;
    info(): ModelInfo;
    /** Times every strategy that can win here on a short generation; the fastest becomes the default. */
    calibrate(options: CalibrateOptions | null | undefined): Promise<Calibration>;
    /** Applies a saved calibration of this model on this adapter. */
    useCalibration(calibration: Calibration): void;
    /** The key a calibration of this model on this adapter carries. */
    calibrationKey(): string;
    /** The tokens in the KV cache and their rows, as bytes. */
    saveSession(): Promise<Uint8Array>;
    /** Restores a saved session of this model into the KV cache. */
    loadSession(bytes: Uint8Array): Promise<SessionInfo>;
}

/**
 * A model being loaded from a stream of bytes (`createModelLoader`): `push` each chunk, then
 * `finish`. The header is checked against the adapter as soon as it is in.
 */
export class ModelLoader {
    private constructor();
    free(): void;
    push(chunk: Uint8Array): LoadStatus;
    status(): LoadStatus;
    finish(): Promise<Model>;
}"#;

/// A model loaded on the GPU. Call `free()` to release its GPU memory.
#[wasm_bindgen(skip_typescript)]
pub struct Model {
    inner: Rc<RefCell<TextModel>>,
    tokenizer: Arc<Tokenizer>,
    /// Kept up to date by calibration (strategy, reason, memory), readable during a generation.
    info: Rc<RefCell<ModelInfo>>,
    calibration_key: String,
}

impl Model {
    pub(super) fn new(mut model: TextModel) -> Self {
        let info = ModelInfo::of(&mut model);
        let tokenizer = model.tokenizer_handle();
        let calibration_key = model.gpu().calibration_key();
        let inner = Rc::new(RefCell::new(model));
        super::device::register(&inner);
        Self {
            tokenizer,
            calibration_key,
            inner,
            info: Rc::new(RefCell::new(info)),
        }
    }
}

fn busy() -> FuselmError {
    FuselmError::Busy("this model is already generating; await the running generation first".into())
}

/// What to generate from, as received from JS.
enum JsPrompt {
    Text(String),
    Messages(Vec<ChatMessage>),
}

#[wasm_bindgen]
impl Model {
    /// Generation from `prompt`: greedy by default, sampled with `temperature` and the other
    /// sampling options; `strategy` names one of the four strategies (default: the model's
    /// `info.strategy`). `on_token` streams; `keep_going()` is asked between prefill batches
    /// (false: the generation stops there, `stopReason` "aborted").
    pub fn generate(
        &self,
        prompt: String,
        options: Option<Ts<GenerateOptions>>,
        on_token: Option<js_sys::Function>,
        keep_going: Option<js_sys::Function>,
    ) -> js_sys::Promise {
        self.run(
            Ok(JsPrompt::Text(prompt)),
            from_js(options),
            on_token,
            keep_going,
        )
    }

    /// Generation from a conversation (`ChatMessage[]`) rendered with the chat template.
    pub fn chat(
        &self,
        messages: JsValue,
        options: Option<Ts<GenerateOptions>>,
        on_token: Option<js_sys::Function>,
        keep_going: Option<js_sys::Function>,
    ) -> js_sys::Promise {
        let messages = serde_wasm_bindgen::from_value::<Vec<ChatMessage>>(messages)
            .map(JsPrompt::Messages)
            .map_err(|e| {
                to_js_error(FuselmError::InvalidArgument(format!(
                    "messages must be an array of {{ role, content }}: {e}"
                )))
            });
        self.run(messages, from_js(options), on_token, keep_going)
    }

    fn run(
        &self,
        prompt: Result<JsPrompt, JsValue>,
        options: Result<Option<GenerateOptions>, JsValue>,
        on_token: Option<js_sys::Function>,
        keep_going: Option<js_sys::Function>,
    ) -> js_sys::Promise {
        let inner = Rc::clone(&self.inner);
        wasm_bindgen_futures::future_to_promise(async move {
            let prompt = prompt?;
            let options = options?.unwrap_or_default();
            let result = generate(
                &inner,
                &prompt,
                &options,
                on_token.as_ref(),
                keep_going.as_ref(),
            )
            .await
            .map_err(to_js_error)?;
            Ok(to_js(&result)?.into())
        })
    }

    /// Compiles `format` for this model's vocabulary now and keeps it, so the first generation
    /// with it starts at once (`TextModel::prepare_response_format`). "busy" during a
    /// generation; "constraint" when the format cannot compile.
    #[wasm_bindgen(js_name = prepareResponseFormat)]
    pub fn prepare_response_format(
        &self,
        format: Ts<ResponseFormat>,
    ) -> Result<Ts<PreparedFormat>, JsValue> {
        let format = from_js(Some(format))?.unwrap_or(ResponseFormat::Text);
        let mut model = self
            .inner
            .try_borrow_mut()
            .map_err(|_| to_js_error(busy()))?;
        let prepared = model
            .prepare_response_format(&format)
            .map_err(to_js_error)?;
        to_js(&prepared)
    }

    /// Token ids of `text` (with the model's BOS when `add_special`; `<|…|>` control tokens
    /// recognised when `parse_special`).
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        self.tokenizer.encode(text, add_special, parse_special)
    }

    /// The text of `ids` (control tokens render as nothing). Rejects ids outside the vocabulary.
    pub fn detokenize(&self, ids: Vec<u32>) -> Result<String, JsValue> {
        let vocab = self.tokenizer.vocab_size();
        if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(to_js_error(FuselmError::InvalidArgument(format!(
                "token id {bad} is outside the vocabulary (size {vocab})"
            ))));
        }
        Ok(self.tokenizer.decode_lossy(&ids, false))
    }

    /// The model's hyper-parameters, memory and default strategy. Available during a
    /// generation too.
    pub fn info(&self) -> Result<Ts<ModelInfo>, JsValue> {
        // The memory as of now when the model is idle (a megakernel's arena appears on its
        // first generation); during a generation, as last seen.
        if let Ok(mut model) = self.inner.try_borrow_mut() {
            self.info.borrow_mut().memory = model.gpu().memory();
        }
        to_js(&*self.info.borrow())
    }

    /// Times a short greedy generation with every strategy that can win here and makes the
    /// fastest the default (see `Calibration`). Rejects with "busy" during a generation.
    pub fn calibrate(&self, options: Option<Ts<CalibrateOptions>>) -> js_sys::Promise {
        let inner = Rc::clone(&self.inner);
        let info = Rc::clone(&self.info);
        let options = from_js(options);
        wasm_bindgen_futures::future_to_promise(async move {
            let options = options?.unwrap_or_default();
            let c = calibrate(&inner, &info, &options)
                .await
                .map_err(to_js_error)?;
            Ok(to_js(&c)?.into())
        })
    }

    /// Applies a saved calibration of this model on this adapter (same `key`); rejects with
    /// "invalid-argument" for another one, "busy" during a generation.
    #[wasm_bindgen(js_name = useCalibration)]
    pub fn use_calibration(&self, calibration: JsValue) -> Result<(), JsValue> {
        let c: Calibration = serde_wasm_bindgen::from_value(calibration).map_err(|e| {
            to_js_error(FuselmError::InvalidArgument(format!(
                "not a calibration (as model.calibrate() returns): {e}"
            )))
        })?;
        let mut model = self
            .inner
            .try_borrow_mut()
            .map_err(|_| to_js_error(busy()))?;
        model.gpu().use_calibration(&c).map_err(to_js_error)?;
        let mut info = self.info.borrow_mut();
        (info.strategy, info.strategy_reason) = model.gpu().default_strategy();
        Ok(())
    }

    /// The key a calibration of this model on this adapter carries (to look one up in a cache).
    #[wasm_bindgen(js_name = calibrationKey)]
    pub fn calibration_key(&self) -> String {
        self.calibration_key.clone()
    }

    /// The tokens the KV cache holds and their rows, as bytes (`GpuModel::save_session`).
    /// Rejects with "busy" during a generation.
    #[wasm_bindgen(js_name = saveSession)]
    pub fn save_session(&self) -> js_sys::Promise {
        let inner = Rc::clone(&self.inner);
        wasm_bindgen_futures::future_to_promise(async move {
            let bytes = save_session(&inner).await.map_err(to_js_error)?;
            Ok(js_sys::Uint8Array::from(bytes.as_slice()).into())
        })
    }

    /// Restores a session saved from this model (`GpuModel::load_session`): resolves with
    /// what it holds; rejects with "session" for bytes of another model or load, or damaged
    /// ones (the model stays as it was), "busy" during a generation.
    #[wasm_bindgen(js_name = loadSession)]
    pub fn load_session(&self, bytes: Vec<u8>) -> js_sys::Promise {
        let inner = Rc::clone(&self.inner);
        wasm_bindgen_futures::future_to_promise(async move {
            let info = load_session(&inner, &bytes).await.map_err(to_js_error)?;
            Ok(to_js(&info)?.into())
        })
    }
}

// As `generate` below: the RefMut held across the awaits is the busy lock.
#[allow(clippy::await_holding_refcell_ref)]
async fn save_session(inner: &RefCell<TextModel>) -> Result<Vec<u8>, FuselmError> {
    let mut model = inner.try_borrow_mut().map_err(|_| busy())?;
    if let Some(why) = model.gpu().context().lost() {
        return Err(FuselmError::DeviceLost(why));
    }
    let result = model.gpu().save_session().await;
    result
        .map(|(bytes, _)| bytes)
        .map_err(|e| model.gpu().context().explain(e))
}

#[allow(clippy::await_holding_refcell_ref)]
async fn load_session(
    inner: &RefCell<TextModel>,
    bytes: &[u8],
) -> Result<SessionInfo, FuselmError> {
    let mut model = inner.try_borrow_mut().map_err(|_| busy())?;
    if let Some(why) = model.gpu().context().lost() {
        return Err(FuselmError::DeviceLost(why));
    }
    let result = model.gpu().load_session(bytes).await;
    result.map_err(|e| model.gpu().context().explain(e))
}

// As `generate` below: the RefMut held across the awaits is the busy lock.
#[allow(clippy::await_holding_refcell_ref)]
async fn calibrate(
    inner: &RefCell<TextModel>,
    info: &RefCell<ModelInfo>,
    options: &CalibrateOptions,
) -> Result<Calibration, FuselmError> {
    let mut model = inner.try_borrow_mut().map_err(|_| busy())?;
    if let Some(why) = model.gpu().context().lost() {
        return Err(FuselmError::DeviceLost(why));
    }
    let result = model.gpu().calibrate(options).await;
    let c = result.map_err(|e| model.gpu().context().explain(e))?;
    let gpu = model.gpu();
    let mut info = info.borrow_mut();
    (info.strategy, info.strategy_reason) = gpu.default_strategy();
    info.memory = gpu.memory();
    Ok(c)
}

// The RefMut held across the awaits is the busy lock (see the module comment); every other access
// uses `try_borrow*`, so holding it can only make another call reject, never panic.
#[allow(clippy::await_holding_refcell_ref)]
async fn generate(
    inner: &RefCell<TextModel>,
    prompt: &JsPrompt,
    options: &GenerateOptions,
    on_token: Option<&js_sys::Function>,
    keep_going: Option<&js_sys::Function>,
) -> Result<GenerateResult, FuselmError> {
    let mut model = inner.try_borrow_mut().map_err(|_| busy())?;
    if let Some(why) = model.gpu().context().lost() {
        return Err(FuselmError::DeviceLost(why));
    }
    let prompt = match prompt {
        JsPrompt::Text(text) => Prompt::Text(text),
        JsPrompt::Messages(messages) => Prompt::Messages(messages),
    };
    let mut callback = |text: &str, id: Option<u32>| match on_token {
        None => true,
        // A callback that throws stops the generation like one that returns false.
        Some(f) => f
            .call2(
                &JsValue::NULL,
                &JsValue::from_str(text),
                &id.map_or(JsValue::UNDEFINED, JsValue::from),
            )
            .map(|v| v.as_bool() != Some(false))
            .unwrap_or(false),
    };
    // A callback that throws stops the generation too.
    let go_on = || {
        keep_going.is_none_or(|f| {
            f.call0(&JsValue::NULL)
                .map(|v| v.as_bool() != Some(false))
                .unwrap_or(false)
        })
    };
    let result = model
        .generate_until(prompt, options, &mut callback, &go_on)
        .await;
    result.map_err(|e| model.gpu().context().explain(e))
}
