//! A model you talk to in text: the GPU model with its tokenizer and chat template. This is
//! what the CLI and the JS facade use; it owns prompt encoding, end-of-generation handling and
//! streaming decode (only whole UTF-8 characters are handed out).

use super::generation::{GenerationRequest, Strategy, DEFAULT_CHUNK_TOKENS};
use super::gpu_model::{GpuModel, LoadOptions, StopReason};
use super::vocab::{chat_template_from, tokenizer_from_gguf};
use crate::chat_template::{ChatMessage, ChatTemplate};
use crate::error::{FuselmError, Result};
use crate::gguf::{Gguf, ModelConfig};
use crate::gpu::GpuContext;
use crate::sampling::{SamplingOptions, MAX_STOP_IDS};
use crate::tokenizer::{StreamDecoder, Tokenizer};
use serde::{Deserialize, Serialize};

/// Options of one generation. Every field is optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct GenerateOptions {
    /// Most tokens to generate. Default: 128.
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
    /// How the generation runs on the GPU: "fused" (default) or "unfused" (the baseline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub strategy: Option<Strategy>,
    /// Fused strategy: decode steps per compute pass; the host receives tokens (and text
    /// streams) at these boundaries. Default: 32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub chunk_tokens: Option<u32>,
    /// Sampling settings (temperature, topK, topP, minP, penalties, seed); greedy by default.
    #[serde(flatten)]
    pub sampling: SamplingOptions,
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
}

/// The result of one generation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct GenerateResult {
    pub text: String,
    pub prompt_tokens: Vec<u32>,
    pub tokens: Vec<u32>,
    pub stop_reason: StopReason,
    pub timings: GenerateTimings,
}

pub struct TextModel {
    gpu: GpuModel,
    tokenizer: Tokenizer,
    template: Option<ChatTemplate>,
}

const DEFAULT_MAX_TOKENS: u32 = 128;

impl TextModel {
    /// Parses a whole GGUF file, builds its tokenizer and template, and loads it on `ctx`.
    pub async fn load(ctx: GpuContext, file: &[u8], options: &LoadOptions) -> Result<Self> {
        let gguf = Gguf::parse(file)?;
        let tokenizer = tokenizer_from_gguf(&gguf)?;
        let template = chat_template_from(&tokenizer)?;
        let gpu = GpuModel::load_parsed(ctx, &gguf, file, options).await?;
        Ok(Self {
            gpu,
            tokenizer,
            template,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        self.gpu.config()
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn gpu(&mut self) -> &mut GpuModel {
        &mut self.gpu
    }

    /// The token ids `prompt` becomes under `options` (chat template applied when asked).
    pub fn encode_prompt(&self, prompt: &str, options: &GenerateOptions) -> Result<Vec<u32>> {
        let text = if options.chat.unwrap_or(false) {
            let template = self.template.as_ref().ok_or_else(|| {
                FuselmError::InvalidArgument("this model has no chat template".into())
            })?;
            let mut messages = Vec::new();
            if let Some(system) = &options.system {
                messages.push(ChatMessage::new("system", system.as_str()));
            }
            messages.push(ChatMessage::new("user", prompt));
            template.render(&messages, true)?
        } else {
            prompt.to_string()
        };
        Ok(self.tokenizer.encode(&text, true, true))
    }

    /// The end-of-generation ids the sampler stops at (at most [`MAX_STOP_IDS`]).
    pub fn stop_ids(&self) -> Vec<u32> {
        let mut ids = self.tokenizer.eog_ids().to_vec();
        ids.truncate(MAX_STOP_IDS);
        ids
    }

    /// Generation (greedy unless sampling options are set). `on_text` receives each complete piece of text as it is decoded and
    /// returns false to stop (the result then says `aborted`).
    pub async fn generate(
        &mut self,
        prompt: &str,
        options: &GenerateOptions,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<GenerateResult> {
        let prompt_tokens = self.encode_prompt(prompt, options)?;
        let max_tokens = options.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
        let stop_ids = self.stop_ids();
        let request = GenerationRequest {
            prompt: &prompt_tokens,
            max_tokens,
            strategy: options.strategy.unwrap_or_default(),
            sampler: options.sampling.resolve(&stop_ids)?,
            chunk_tokens: options.chunk_tokens.unwrap_or(DEFAULT_CHUNK_TOKENS),
        };
        let tokenizer = &self.tokenizer;
        let mut decoder = StreamDecoder::new(false);
        let mut text = String::new();
        let generation = self
            .gpu
            .generate(&request, &mut |id| match decoder.push(tokenizer, id) {
                Some(piece) => {
                    text.push_str(&piece);
                    on_text(&piece)
                }
                None => true,
            })
            .await?;
        let rest = decoder.finish();
        if !rest.is_empty() && generation.stop_reason != StopReason::Aborted {
            text.push_str(&rest);
            on_text(&rest);
        }
        let per_second = |n: usize, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
        Ok(GenerateResult {
            text,
            timings: GenerateTimings {
                prefill_seconds: generation.prefill_seconds,
                decode_seconds: generation.decode_seconds,
                prompt_tokens_per_second: per_second(
                    prompt_tokens.len(),
                    generation.prefill_seconds,
                ),
                decode_tokens_per_second: per_second(
                    generation.tokens.len().saturating_sub(1),
                    generation.decode_seconds,
                ),
            },
            prompt_tokens,
            tokens: generation.tokens,
            stop_reason: generation.stop_reason,
        })
    }
}
