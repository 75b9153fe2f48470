//! Streaming load: the GGUF arrives in chunks (a download, a file read). The header is checked
//! as soon as it is complete — unsupported architecture or quantization, a model over the
//! adapter's limits — before the weights are downloaded, and each tensor is uploaded to the GPU
//! as soon as its bytes are in, so the file is never held whole in memory: besides the header,
//! the loader holds at most the tensor being filled (the largest tensor, ~18 MB for SmolLM2's
//! embedding).

use super::gpu_model::{GpuModel, LoadOptions};
use super::gpu_weights::{is_model_tensor, upload_tensor_parts, ModelWeights, UploadedTensor};
use super::memory::{estimate_sized, MemoryBudget, MemoryUse};
use super::session::Fingerprint;
use super::shared::{check_fit, LoadScopes};
use super::text_model::TextModel;
use crate::chat_template::ChatTemplate;
use crate::error::{FuselmError, Result};
use crate::gguf::{Gguf, GgufStreamReader, ModelConfig, StreamEvent};
use crate::gpu::GpuContext;
use crate::tokenizer::Tokenizer;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Where a streaming load stands.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct LoadStatus {
    /// Bytes pushed so far.
    pub bytes_received: u64,
    /// The header has been parsed and checked against the adapter.
    pub header_ready: bool,
    /// The file's size as its header describes it (end of the last tensor), once known.
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub file_bytes: Option<u64>,
    /// The GPU memory the model will hold once loaded, estimated from the header (see
    /// `estimateMemory`), once the header is in.
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub memory: Option<MemoryUse>,
    /// Tensors the model uses, and how many of them are on the GPU.
    pub tensors_total: u32,
    pub tensors_uploaded: u32,
}

struct Header {
    gguf: Gguf,
    config: ModelConfig,
    tokenizer: Tokenizer,
    template: Option<ChatTemplate>,
    scopes: LoadScopes,
}

/// A model being loaded from a stream of bytes. See the module docs.
pub struct ModelLoader {
    ctx: GpuContext,
    options: LoadOptions,
    reader: GgufStreamReader,
    header: Option<Header>,
    uploaded: HashMap<String, UploadedTensor>,
    status: LoadStatus,
    failed: Option<String>,
    /// The weights' identity, fed tensor by tensor as they arrive.
    fingerprint: Fingerprint,
    /// The budget as of when the header arrives, checked against its estimate before any
    /// weight is uploaded.
    budget: Option<Box<dyn Fn() -> MemoryBudget>>,
}

impl ModelLoader {
    pub fn new(ctx: GpuContext, options: LoadOptions) -> Self {
        Self {
            ctx,
            options,
            reader: GgufStreamReader::new(),
            header: None,
            uploaded: HashMap::new(),
            status: LoadStatus::default(),
            failed: None,
            fingerprint: Fingerprint::default(),
            budget: None,
        }
    }

    /// Refuses the model as soon as its header shows it would pass `budget` (kind
    /// "limit-exceeded", limit "memoryBudget"), before any weight is uploaded.
    pub fn with_memory_budget(mut self, budget: Option<MemoryBudget>) -> Self {
        self.budget = budget.map(|b| Box::new(move || b) as Box<dyn Fn() -> MemoryBudget>);
        self
    }

    /// [`ModelLoader::with_memory_budget`] with the budget taken when the header arrives (what
    /// other models hold then, loads that started meanwhile included).
    pub fn with_memory_budget_at(mut self, budget: impl Fn() -> MemoryBudget + 'static) -> Self {
        self.budget = Some(Box::new(budget));
        self
    }

    /// The source vouches that the file is `len` bytes long (content-length, Blob size): each
    /// tensor's buffer is then allocated whole when it starts, keeping wasm memory near the
    /// largest tensor instead of growing geometrically into it.
    pub fn expect_len(&mut self, len: u64) {
        self.reader.expect_len(len);
    }

    pub fn status(&self) -> &LoadStatus {
        &self.status
    }

    /// The model's configuration, once the header is in.
    pub fn config(&self) -> Option<&ModelConfig> {
        self.header.as_ref().map(|h| &h.config)
    }

    /// Feeds the next bytes of the file. An error is final: later calls fail too.
    pub fn push(&mut self, chunk: &[u8]) -> Result<()> {
        if let Some(e) = &self.failed {
            return Err(FuselmError::InvalidArgument(format!(
                "this load already failed: {e}"
            )));
        }
        let result = self
            .reader
            .push(chunk)
            .map_err(FuselmError::from)
            .and_then(|events| self.take(events));
        self.status.bytes_received = self.reader.bytes_received();
        if let Err(e) = &result {
            self.failed = Some(e.to_string());
            self.uploaded.clear();
        }
        result
    }

    fn take(&mut self, events: Vec<StreamEvent>) -> Result<()> {
        for event in events {
            match event {
                StreamEvent::Header(gguf) => self.on_header(*gguf)?,
                StreamEvent::Tensor { index, data } => self.on_tensor(index, &data)?,
            }
        }
        Ok(())
    }

    fn on_header(&mut self, gguf: Gguf) -> Result<()> {
        let config = ModelConfig::from_gguf(&gguf)?;
        let sizes = self.options.sizes(&config, self.ctx.identity.is_software)?;
        check_fit(&self.ctx, &config, &gguf, sizes)?;
        let memory = estimate_sized(&config, &gguf, sizes)?;
        if let Some(budget) = &self.budget {
            budget().check(&memory, sizes.n_ctx)?;
        }
        self.status.memory = Some(memory);
        let (tokenizer, template) = TextModel::text_parts(&gguf)?;
        self.status.header_ready = true;
        self.status.file_bytes = gguf.tensors().iter().map(|t| t.offset + t.size_bytes).max();
        self.status.tensors_total = gguf
            .tensors()
            .iter()
            .filter(|t| is_model_tensor(&t.name, &config))
            .count() as u32;
        // Uploads from here to `finish` run inside these scopes (popped into a typed error).
        let scopes = LoadScopes::push(&self.ctx);
        self.header = Some(Header {
            gguf,
            config,
            tokenizer,
            template,
            scopes,
        });
        Ok(())
    }

    fn on_tensor(&mut self, index: usize, data: &[u8]) -> Result<()> {
        let h = self
            .header
            .as_ref()
            .ok_or_else(|| FuselmError::Gpu("a tensor arrived before the header".into()))?;
        let Some(t) = h.gguf.tensors().get(index) else {
            return Ok(());
        };
        if !is_model_tensor(&t.name, &h.config) {
            return Ok(());
        }
        self.fingerprint.add(t, data);
        let parts = upload_tensor_parts(&self.ctx, t, data, &h.config)?;
        self.uploaded.extend(parts);
        self.status.tensors_uploaded += 1;
        Ok(())
    }

    /// Ends the stream: checks the file was complete, then compiles the kernels and binds the
    /// buffers (the "compile" phase).
    pub async fn finish(mut self) -> Result<TextModel> {
        if let Some(e) = self.failed.take() {
            return Err(FuselmError::InvalidArgument(format!(
                "this load already failed: {e}"
            )));
        }
        let reader = std::mem::take(&mut self.reader);
        let events = reader.finish()?;
        self.take(events)?;
        let h = self
            .header
            .take()
            .ok_or_else(|| FuselmError::Gpu("the GGUF header never completed".into()))?;
        let mut uploaded = std::mem::take(&mut self.uploaded);
        let identity = std::mem::take(&mut self.fingerprint).finish();
        let weights =
            ModelWeights::assemble(&h.config, identity, |name| Ok(uploaded.remove(name)))?;
        let gpu =
            GpuModel::from_weights(self.ctx, h.config, weights, &self.options, h.scopes).await?;
        Ok(TextModel::from_parts(gpu, h.tokenizer, h.template))
    }
}
