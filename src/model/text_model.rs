//! A model you talk to in text: the GPU model with its tokenizer and chat template. This is
//! what the CLI and the JS facade use; it owns prompt encoding, end-of-generation handling and
//! streaming decode (only whole UTF-8 characters are handed out).

use super::context_shift::ContextShift;
use super::generation::{StopReason, DEFAULT_CHUNK_TOKENS};
use super::gpu_model::{GenerationRequest, GpuModel, LoadOptions};
use super::stop_text::StopText;
use super::strategy::Strategy;
use super::vocab::{chat_template_from, tokenizer_from_gguf};
use crate::chat_template::{ChatMessage, ChatTemplate, TemplateError};
use crate::constraint::{ConstraintCache, ResponseFormat, VocabBytes};
use crate::error::{FuselmError, Result};
use crate::gguf::{Gguf, ModelConfig};
use crate::gpu::GpuContext;
use crate::sampling::{SamplingOptions, MAX_STOP_IDS};
use crate::tokenizer::{StreamDecoder, Tokenizer};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Options of one generation. Every field is optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct GenerateOptions {
    /// Most tokens to generate. Default: 128 (with `contextShift: false`, at most what the
    /// prompt leaves of `nCtx`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub max_tokens: Option<u32>,
    /// Render the prompt as a user message with the model's chat template. Default: false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub chat: Option<bool>,
    /// With `chat`: a system message (else the template's default, if any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub system: Option<String>,
    /// How the generation runs on the GPU: "fused", "unfused" (the baseline), "megakernel"
    /// (small llama-family models) or "megakernel-grid" (experimental, native only). Default:
    /// the model's `info.strategy` (the planner's choice, unless the model was loaded with a
    /// strategy or calibrated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub strategy: Option<Strategy>,
    /// Fused: the most decode steps per compute pass; the host receives tokens (and text
    /// streams) at these boundaries. Chunks start at 4 steps and grow up to this only while the
    /// GPU, not the host's recording, is the bound. Megakernels: tokens per dispatch. Unfused:
    /// not used (every token is its own submit). Default: 32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub chunk_tokens: Option<u32>,
    /// Stop sequences: the generation ends when the text contains one; it is not part of the
    /// output (not even a prefix of it is ever streamed, when split across tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub stop: Option<Vec<String>>,
    /// Keep the KV cache of the longest prefix shared with the previous generation's prompt and
    /// output (multi-turn chat: only the new turn is prefilled). Default: false (a fresh context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub reuse_prefix: Option<bool>,
    /// When the prompt and the output would pass `nCtx`: keep the first `keepTokens` tokens,
    /// drop the oldest after them (half of those at a time, as llama.cpp's context shift) and
    /// go on, the kept keys re-rotated on the GPU so nothing is prefilled again; the result's
    /// `droppedTokens` says how many tokens are out of the context. With `reusePrefix`, the next
    /// turn (the same conversation plus a new message) continues from the shifted cache. false:
    /// a generation that would pass `nCtx` is a `limit-exceeded` error. Default: true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub context_shift: Option<bool>,
    /// With `contextShift`: tokens at the start that are never dropped (at least 1). Default: a
    /// chat's system message (the tokens the chat template renders for it alone), else 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub keep_tokens: Option<u32>,
    /// What the output must be: JSON valid under a JSON Schema, any JSON object, text a
    /// regular expression matches, or text a GBNF grammar's `root` rule matches. Each token is chosen among those that keep the output
    /// valid, on the GPU (fused) or the host (unfused); the end of generation is allowed only
    /// where the output is complete, so a generation cut by `maxTokens` ends with
    /// `stopReason: "length"` and partial output. Default: free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub response_format: Option<ResponseFormat>,
    /// Report each generated token's log-probability in `logprobs` of the result: the natural
    /// log of its probability under the logits the sampler ranked at that step (penalised, the
    /// ids a `responseFormat` disallows removed) at temperature 1. Fused and unfused
    /// strategies (the default picks one). Default: false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub logprobs: Option<bool>,
    /// With `logprobs`: how many of each step's most likely tokens to report with it (0–20).
    /// Default: 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub top_logprobs: Option<u32>,
    /// Sampling settings (temperature, topK, topP, minP, penalties, seed); greedy by default.
    #[serde(flatten)]
    pub sampling: SamplingOptions,
}

/// One alternative of a step (`TokenLogprob::topLogprobs`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct TopLogprob {
    /// The token's text (lossy where its bytes are not whole UTF-8 characters).
    pub token: String,
    pub id: u32,
    /// The token's bytes.
    pub bytes: Vec<u8>,
    /// Natural log of its probability.
    pub logprob: f32,
}

/// A generated token's log-probability (`GenerateOptions::logprobs`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct TokenLogprob {
    /// The token's text (lossy where its bytes are not whole UTF-8 characters).
    pub token: String,
    pub id: u32,
    /// The token's bytes.
    pub bytes: Vec<u8>,
    /// Natural log of its probability.
    pub logprob: f32,
    /// The step's most likely tokens, best first (`topLogprobs` of them).
    pub top_logprobs: Vec<TopLogprob>,
}

/// Measured times of one generation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct GenerateTimings {
    /// Prompt submitted → first generated token on the host (s).
    pub prefill_seconds: f64,
    /// The remaining tokens (s).
    pub decode_seconds: f64,
    pub prompt_tokens_per_second: f64,
    /// Tokens after the first, per second of `decodeSeconds`.
    pub decode_tokens_per_second: f64,
    /// Host time spent recording and submitting the decode steps' GPU commands (s; fused:
    /// the chunks after the first token). Near `decodeSeconds`, decode is bound by command
    /// recording on the CPU, not by the GPU.
    pub record_seconds: f64,
    /// Compiling `responseFormat` for this model's vocabulary (s), before the prompt is
    /// submitted; near 0 when it was compiled before (a model keeps its last 8) and 0 without
    /// one.
    pub constraint_seconds: f64,
}

/// A response format compiled ahead of its first generation (`prepare_response_format`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct PreparedFormat {
    /// Seconds this call took: the compile, or near 0 when the format was kept already.
    pub compile_seconds: f64,
    /// Whether the model had it compiled already (it keeps its last 8 formats).
    pub cached: bool,
    /// Automaton states that tokens reach (0 for `{ type: "text" }`).
    pub states: u32,
    /// Distinct token masks among them.
    pub masks: u32,
    /// Bytes of the table a generation with this format keeps on the GPU.
    pub table_bytes: u64,
}

/// The result of one generation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct GenerateResult {
    /// The generated text (without a stop sequence or end-of-generation token).
    pub text: String,
    pub prompt_tokens: Vec<u32>,
    /// Generated ids (a stop token is not included; a stop sequence's tokens are).
    pub tokens: Vec<u32>,
    pub stop_reason: StopReason,
    /// Prompt tokens whose KV cache was kept from the previous generation (`reusePrefix`).
    pub reused_prompt_tokens: u32,
    /// Tokens of the prompt and output no longer in the context: dropped by a context shift
    /// (`contextShift`) in this generation or, with `reusePrefix`, in earlier turns. 0: none.
    pub dropped_tokens: u32,
    /// Messages left out of a conversation whose text alone is more than the context could hold
    /// (`contextShift`; the oldest after the system message, whole turns). 0: none.
    pub dropped_messages: u32,
    pub timings: GenerateTimings,
    /// One per generated token, with `logprobs` asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub logprobs: Option<Vec<TokenLogprob>>,
}

/// Gemma 3's chat template (Google's `tokenizer_config.json`, text parts only), used for gemma3
/// files that carry none: a system message is prefixed to the first user turn.
const GEMMA_TEMPLATE: &str = "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}\
{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- set loop_messages = messages[1:] -%}\
{%- else -%}{%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}{%- endif -%}\
{%- for message in loop_messages -%}{%- if message['role'] == 'assistant' -%}{%- set role = 'model' -%}\
{%- else -%}{%- set role = message['role'] -%}{%- endif -%}\
{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}\
{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}{%- endfor -%}\
{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}";

/// What to generate from: plain text or a conversation rendered with the chat template.
#[derive(Debug, Clone, Copy)]
pub enum Prompt<'a> {
    /// Text, tokenized as is (or as one user message with `GenerateOptions::chat`).
    Text(&'a str),
    /// A conversation; the template adds the assistant's turn header.
    Messages(&'a [ChatMessage]),
}

pub struct TextModel {
    gpu: GpuModel,
    tokenizer: Arc<Tokenizer>,
    template: Option<ChatTemplate>,
    /// [`Tokenizer::max_token_bytes`], once.
    max_token_bytes: usize,
    /// Response formats compiled for this model's vocabulary.
    constraints: ConstraintCache,
}

const DEFAULT_MAX_TOKENS: u32 = 128;

/// The limit a prompt too long for the context is refused under, before tokenizing: its bytes
/// against nCtx × the vocabulary's longest token ([`TextModel::prompt_byte_limit`]; `needed`
/// is at least the rendered bytes for a chat, whose rendering stops at the limit).
const PROMPT_BYTES_LIMIT: &str = "nCtx (prompt bytes: nCtx x the longest token's bytes)";

impl TextModel {
    /// Parses a whole GGUF file, builds its tokenizer and template, and loads it on `ctx`.
    pub async fn load(ctx: GpuContext, file: &[u8], options: &LoadOptions) -> Result<Self> {
        let gguf = Gguf::parse(file)?;
        let gpu = GpuModel::load_parsed(ctx, &gguf, file, options).await?;
        Self::new(&gguf, gpu)
    }

    /// The text side of a model whose header is `gguf` and whose weights are on the GPU.
    fn new(gguf: &Gguf, gpu: GpuModel) -> Result<Self> {
        let (tokenizer, template) = Self::text_parts(gguf)?;
        Ok(Self::from_parts(gpu, tokenizer, template))
    }

    /// The tokenizer and chat template of a GGUF header.
    pub(crate) fn text_parts(gguf: &Gguf) -> Result<(Tokenizer, Option<ChatTemplate>)> {
        let tokenizer = tokenizer_from_gguf(gguf)?;
        let mut template = chat_template_from(&tokenizer)?;
        let arch = gguf.metadata().get_str("general.architecture").ok();
        if template.is_none() && arch == Some("gemma3") {
            // Base-model GGUFs carry no template; Gemma's turn format is the model family's.
            template = Some(ChatTemplate::new(
                GEMMA_TEMPLATE,
                tokenizer.bos_text(),
                tokenizer.eos_text(),
            )?);
        }
        Ok((tokenizer, template))
    }

    pub(crate) fn from_parts(
        gpu: GpuModel,
        tokenizer: Tokenizer,
        template: Option<ChatTemplate>,
    ) -> Self {
        Self {
            gpu,
            max_token_bytes: tokenizer.max_token_bytes(),
            constraints: ConstraintCache::default(),
            tokenizer: Arc::new(tokenizer),
            template,
        }
    }

    pub fn config(&self) -> &ModelConfig {
        self.gpu.config()
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// A shared handle on the tokenizer (usable while a generation holds the model).
    pub fn tokenizer_handle(&self) -> Arc<Tokenizer> {
        Arc::clone(&self.tokenizer)
    }

    pub fn has_chat_template(&self) -> bool {
        self.template.is_some()
    }

    pub fn gpu(&mut self) -> &mut GpuModel {
        &mut self.gpu
    }

    /// The most bytes of prompt text that could fit the context: nCtx tokens of the
    /// vocabulary's longest spelling. Longer text is refused before it is tokenized (or, from a
    /// chat template, before it is all rendered).
    pub fn prompt_byte_limit(&self) -> usize {
        (self.gpu.n_ctx() as usize).saturating_mul(self.max_token_bytes)
    }

    /// The token ids `prompt` becomes under `options` (chat template applied when asked).
    pub fn encode_prompt(&self, prompt: &str, options: &GenerateOptions) -> Result<Vec<u32>> {
        if !options.chat.unwrap_or(false) {
            let available = self.prompt_byte_limit();
            if prompt.len() > available {
                return Err(FuselmError::LimitExceeded {
                    limit: PROMPT_BYTES_LIMIT,
                    needed: prompt.len() as u64,
                    available: available as u64,
                });
            }
            return Ok(self.tokenizer.encode(prompt, true, true));
        }
        let mut messages = Vec::new();
        if let Some(system) = &options.system {
            messages.push(ChatMessage::new("system", system.as_str()));
        }
        messages.push(ChatMessage::new("user", prompt));
        self.encode_messages(&messages)
    }

    /// The token ids of a conversation rendered with the chat template, ending with the header
    /// of the assistant's turn.
    pub fn encode_messages(&self, messages: &[ChatMessage]) -> Result<Vec<u32>> {
        let template = self.template.as_ref().ok_or_else(|| {
            FuselmError::InvalidArgument("this model has no chat template".into())
        })?;
        if messages.is_empty() {
            return Err(FuselmError::InvalidArgument(
                "a conversation needs at least one message".into(),
            ));
        }
        // Text longer than nCtx tokens of the vocabulary's longest spelling cannot fit: the
        // render stops there instead of producing (and tokenizing) it all.
        let limit = self.prompt_byte_limit();
        let text = template
            .render_limited(messages, true, limit)
            .map_err(|e| match e {
                TemplateError::TooLong { limit } => FuselmError::LimitExceeded {
                    limit: PROMPT_BYTES_LIMIT,
                    needed: limit as u64 + 1,
                    available: limit as u64,
                },
                e => e.into(),
            })?;
        // A template that writes BOS itself (Gemma's `{{ bos_token }}`) gets no second one, as
        // Hugging Face's apply_chat_template (llama.cpp would add it again, and warns).
        let bos = self.tokenizer.bos_text();
        let add_bos = bos.is_empty() || !text.starts_with(bos);
        Ok(self.tokenizer.encode(&text, add_bos, true))
    }

    /// [`TextModel::encode_messages`] of the most recent messages whose text could fit the
    /// context: while the rendering is longer than the prompt byte limit, the oldest message
    /// after a leading system message is left out (and those after it until a user message
    /// comes first; the last message always stays). Returns the ids and how many messages were
    /// left out — that many follow the system message in `messages`. Renders at most
    /// `messages.len()` times, each bounded by the limit.
    pub fn encode_recent(&self, messages: &[ChatMessage]) -> Result<(Vec<u32>, u32)> {
        let system = usize::from(messages.first().is_some_and(|m| m.role == "system"));
        let mut skip = 0;
        loop {
            let kept: Vec<ChatMessage> = messages[..system]
                .iter()
                .chain(&messages[system + skip..])
                .cloned()
                .collect();
            match self.encode_messages(&kept) {
                Err(FuselmError::LimitExceeded { limit, .. })
                    if limit == PROMPT_BYTES_LIMIT && system + skip + 1 < messages.len() =>
                {
                    skip += 1;
                    while system + skip + 1 < messages.len()
                        && messages[system + skip].role != "user"
                    {
                        skip += 1;
                    }
                }
                Ok(ids) => return Ok((ids, skip as u32)),
                Err(e) => return Err(e),
            }
        }
    }

    /// The end-of-generation ids the sampler stops at (at most [`MAX_STOP_IDS`]).
    pub fn stop_ids(&self) -> Vec<u32> {
        let mut ids = self.tokenizer.eog_ids().to_vec();
        ids.truncate(MAX_STOP_IDS);
        ids
    }

    /// Compiles `format` for this model's vocabulary now and keeps it (with the model's last
    /// 8), so the first generation that uses it does not wait for the compile: a page can
    /// prepare its forms' schemas while the user types. A format that cannot compile is the
    /// `constraint` error a generation would get.
    pub fn prepare_response_format(&mut self, format: &ResponseFormat) -> Result<PreparedFormat> {
        let start = crate::clock::now_seconds();
        let cached = self.constraints.contains(format);
        let stop_ids = self.stop_ids();
        let tokenizer = &self.tokenizer;
        let constraint = self
            .constraints
            .get(format, || VocabBytes::from_tokenizer(tokenizer, &stop_ids))?;
        let (states, masks, table_bytes) = constraint.map_or((0, 0, 0), |c| {
            let a = &c.automaton;
            let words = crate::kernels::constraint::table_len(a) as u64;
            (a.n_token_states(), a.n_masks(), words * 4)
        });
        Ok(PreparedFormat {
            compile_seconds: crate::clock::now_seconds() - start,
            cached,
            states,
            masks,
            table_bytes,
        })
    }

    /// Generation (greedy unless sampling options are set). `on_token(text, Some(id))` sees
    /// each generated id with the text released by it (possibly empty: an incomplete UTF-8
    /// character, or text that could be the start of a stop sequence, is held back) and returns
    /// false to stop (the result then says `aborted`); a last `on_token(text, None)` hands over
    /// text held back until the end.
    pub async fn generate(
        &mut self,
        prompt: Prompt<'_>,
        options: &GenerateOptions,
        on_token: &mut dyn FnMut(&str, Option<u32>) -> bool,
    ) -> Result<GenerateResult> {
        self.generate_until(prompt, options, on_token, &|| true)
            .await
    }

    /// [`TextModel::generate`], asking `keep_going` between prefill batches (false: the
    /// generation stops there with `StopReason::Aborted`; an abort need not wait for a long
    /// prompt's prefill).
    pub async fn generate_until(
        &mut self,
        prompt: Prompt<'_>,
        options: &GenerateOptions,
        on_token: &mut dyn FnMut(&str, Option<u32>) -> bool,
        keep_going: &dyn Fn() -> bool,
    ) -> Result<GenerateResult> {
        let shifting = options.context_shift.unwrap_or(true);
        let (prompt_tokens, dropped_messages) = match prompt {
            Prompt::Text(text) => (self.encode_prompt(text, options)?, 0),
            Prompt::Messages(messages) if shifting => self.encode_recent(messages)?,
            Prompt::Messages(messages) => (self.encode_messages(messages)?, 0),
        };
        // Without a shift the default fits the context: 128, or what the prompt leaves of nCtx.
        let room = self.gpu.n_ctx().saturating_sub(prompt_tokens.len() as u32);
        let max_tokens = options.max_tokens.unwrap_or(if shifting {
            DEFAULT_MAX_TOKENS
        } else {
            DEFAULT_MAX_TOKENS.min(room)
        });
        let shift = match (shifting, options.keep_tokens) {
            (false, _) => None,
            (true, Some(keep)) => Some(ContextShift { keep }),
            // A long system message keeps at most half of the context: each shift must free
            // room.
            (true, None) => Some(ContextShift {
                keep: self
                    .system_tokens(prompt, options, &prompt_tokens)
                    .min(self.gpu.n_ctx() / 2),
            }),
        };
        let stop_ids = self.stop_ids();
        // Checked before the response format compiles.
        let logprobs = options
            .logprobs
            .unwrap_or(false)
            .then(|| options.top_logprobs.unwrap_or(0));
        if options.top_logprobs.is_some() && logprobs.is_none() {
            return Err(FuselmError::InvalidArgument(
                "topLogprobs (top_logprobs) needs logprobs: true".into(),
            ));
        }
        let compile_start = crate::clock::now_seconds();
        let constraint = match &options.response_format {
            Some(format) => {
                let tokenizer = &self.tokenizer;
                self.constraints
                    .get(format, || VocabBytes::from_tokenizer(tokenizer, &stop_ids))?
            }
            None => None,
        };
        let constraint_seconds = match options.response_format {
            Some(_) => crate::clock::now_seconds() - compile_start,
            None => 0.0,
        };
        let request = GenerationRequest {
            prompt: &prompt_tokens,
            max_tokens,
            strategy: options.strategy.unwrap_or_else(|| {
                self.gpu
                    .default_strategy_with(constraint.is_some(), logprobs.is_some())
            }),
            sampler: options.sampling.resolve(&stop_ids)?,
            chunk_tokens: options.chunk_tokens.unwrap_or(DEFAULT_CHUNK_TOKENS),
            reuse_prefix: options.reuse_prefix.unwrap_or(false),
            constraint: constraint.as_ref(),
            logprobs,
        };
        let tokenizer = &self.tokenizer;
        let mut decoder = StreamDecoder::new(false);
        let mut stops = StopText::new(options.stop.as_deref().unwrap_or_default());
        let mut text = String::new();
        let mut last_id = None;
        let mut generation = self
            .gpu
            .generate_shifting(
                &request,
                shift,
                &mut |id| {
                    last_id = Some(id);
                    let piece = decoder.push(tokenizer, id).unwrap_or_default();
                    let out = stops.push(&piece);
                    text.push_str(&out);
                    on_token(&out, Some(id)) && !stops.hit()
                },
                keep_going,
            )
            .await?;
        let mut stop_reason = generation.stop_reason;
        if stops.hit() {
            stop_reason = StopReason::StopSequence;
            // The token that completed the stop sequence was refused by the callback; it was
            // generated, so it is part of the output ids.
            generation.tokens.extend(last_id);
        } else if stop_reason != StopReason::Aborted {
            // The generation ended: what the decoder and the stop filter held back is final.
            let rest = decoder.finish();
            let out = stops.push(&rest);
            let tail = if stops.hit() {
                stop_reason = StopReason::StopSequence;
                out
            } else {
                out + &stops.finish()
            };
            text.push_str(&tail);
            if !tail.is_empty() {
                // The text of ids already reported: no new id comes with it.
                on_token(&tail, None);
            }
        }
        let logprobs = logprobs.map(|_| {
            let piece = |id: u32| {
                let bytes = tokenizer
                    .token_to_piece(id, true)
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default();
                (String::from_utf8_lossy(&bytes).into_owned(), bytes)
            };
            generation
                .logprobs
                .iter()
                .zip(&generation.tokens)
                .map(|(l, &id)| {
                    let (token, bytes) = piece(id);
                    TokenLogprob {
                        token,
                        id,
                        bytes,
                        logprob: l.logprob,
                        top_logprobs: l
                            .top
                            .iter()
                            .map(|&(id, logprob)| {
                                let (token, bytes) = piece(id);
                                TopLogprob {
                                    token,
                                    id,
                                    bytes,
                                    logprob,
                                }
                            })
                            .collect(),
                    }
                })
                .collect()
        });
        let per_second = |n: usize, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
        let prefilled = prompt_tokens
            .len()
            .saturating_sub(generation.reused_prompt_tokens as usize);
        Ok(GenerateResult {
            text,
            timings: GenerateTimings {
                prefill_seconds: generation.prefill_seconds,
                decode_seconds: generation.decode_seconds,
                prompt_tokens_per_second: per_second(prefilled, generation.prefill_seconds),
                decode_tokens_per_second: per_second(
                    generation.tokens.len().saturating_sub(1),
                    generation.decode_seconds,
                ),
                record_seconds: generation.record_seconds,
                constraint_seconds,
            },
            prompt_tokens,
            tokens: generation.tokens,
            stop_reason,
            reused_prompt_tokens: generation.reused_prompt_tokens,
            dropped_tokens: generation.dropped_tokens,
            dropped_messages,
            logprobs,
        })
    }

    /// The tokens a context shift keeps by default: those `prompt_tokens` share with the chat
    /// template's rendering of the system message alone (1 without one, or for plain text).
    fn system_tokens(
        &self,
        prompt: Prompt<'_>,
        options: &GenerateOptions,
        prompt_tokens: &[u32],
    ) -> u32 {
        let system = match prompt {
            Prompt::Messages(m) => m.first().filter(|m| m.role == "system").cloned(),
            Prompt::Text(_) if options.chat.unwrap_or(false) => options
                .system
                .as_deref()
                .map(|s| ChatMessage::new("system", s)),
            Prompt::Text(_) => None,
        };
        let (Some(system), Some(template)) = (system, &self.template) else {
            return 1;
        };
        let Ok(text) = template.render_limited(&[system], false, self.prompt_byte_limit()) else {
            return 1;
        };
        let bos = self.tokenizer.bos_text();
        let add_bos = bos.is_empty() || !text.starts_with(bos);
        let tokens = self.tokenizer.encode(&text, add_bos, true);
        let shared = tokens
            .iter()
            .zip(prompt_tokens)
            .take_while(|(a, b)| a == b)
            .count();
        (shared as u32).max(1)
    }
}
