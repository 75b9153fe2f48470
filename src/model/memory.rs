//! GPU memory: what a loaded model holds ([`MemoryUse`], `info.memory`), what a model will
//! need, computed from its GGUF header before any weight arrives ([`estimate_memory`](super::estimate_memory)), and a
//! caller's budget shared by the models of one device ([`MemoryBudget`]).
//!
//! WebGPU does not tell how much memory a device has, so the adapter's limits bound single
//! buffers (`check_fit`) and the budget is the caller's: a load whose estimate passes what the
//! budget leaves after the models already loaded is refused before its weights download.

use super::activations::{Activations, SamplerBuffers};
use super::gpu_weights::{is_model_tensor, is_vector};
use super::shared::Sizes;
use crate::error::{FuselmError, Result};
use crate::gguf::{Gguf, ModelConfig, ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT, ROPE_FREQS};
use crate::kernels::WeightFormat;
use serde::{Deserialize, Serialize};

/// GPU memory of a model, in bytes.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct MemoryUse {
    /// Weight matrices and norms, in their GPU layout.
    pub weights: u64,
    /// Keys and values of `nCtx` positions for every layer.
    pub kv_cache: u64,
    /// Activations for one prefill batch, logits and the sampler's buffers.
    pub activations: u64,
    /// The megakernel's weight arena (a second copy of the weights, in one buffer), KV cache
    /// and scratch; 0 until a generation first uses the megakernel (then about `weights` more).
    pub megakernel: u64,
    /// Every other buffer: the fused kernels' copy of the norms, kernel parameters, readback
    /// staging, padding between stacked layers, compiled constraints.
    pub other: u64,
    /// All of it: for a loaded model, the bytes of every GPU buffer it holds.
    pub total: u64,
}

/// [`estimate_memory`](super::estimate_memory) for a parsed configuration and the load's sizes.
pub(crate) fn estimate_sized(config: &ModelConfig, gguf: &Gguf, sizes: Sizes) -> Result<MemoryUse> {
    let mut weights = 0u64;
    let mut vectors = 0u64;
    let mut rope = 0u64;
    for t in gguf.tensors() {
        if !is_model_tensor(&t.name, config) {
            continue;
        }
        if is_vector(&t.name) {
            let bytes = t.dims.iter().product::<u64>() * 4;
            // RoPE frequency factors are kernel inputs, not weights.
            if [ROPE_FREQS, ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT].contains(&t.name.as_str()) {
                rope += bytes;
            } else {
                vectors += bytes;
            }
            continue;
        }
        let format = WeightFormat::from_ggml(t.ggml_type()?)?;
        let k = t.dims.first().copied().unwrap_or(1);
        let n: u64 = t.dims.iter().skip(1).product();
        weights += (format.gpu_row_bytes(k) * n).div_ceil(4) * 4;
    }
    weights += vectors;
    let kv_dim = u64::from(config.n_head_kv) * u64::from(config.head_dim);
    let kv_cache =
        2 * u64::from(config.n_layers) * kv_dim * u64::from(sizes.n_ctx) * sizes.kv.bytes();
    let activations = Activations::bytes_for(config, sizes.n_ctx, sizes.max_batch, false)
        + SamplerBuffers::bytes_for(config.vocab_size);
    // Once the fused kernels are built they hold a second copy of the norms (vectors).
    let other = rope + vectors + OTHER_ALLOWANCE;
    Ok(MemoryUse {
        weights,
        kv_cache,
        activations,
        megakernel: 0,
        other,
        total: weights + kv_cache + activations + other,
    })
}

/// Bytes the estimate allows for kernel parameters, readback staging and the padding between
/// stacked layers beyond the norms' second copy (tests/memory.rs holds a loaded model and one
/// that has generated with every strategy but the megakernel within it).
pub const OTHER_ALLOWANCE: u64 = 256 << 10;

/// A budget for the GPU memory of the models on one device: `budget` bytes in all, of which
/// `in_use` are held by the models already loaded there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    pub budget: u64,
    pub in_use: u64,
}

impl MemoryBudget {
    /// Refuses `need` (a [`estimate_memory`]) when it passes what the budget leaves, with a
    /// typed error (kind "limit-exceeded", limit "memoryBudget") saying both in full.
    pub fn check(&self, need: &MemoryUse, n_ctx: u32) -> Result<()> {
        let available = self.budget.saturating_sub(self.in_use);
        if need.total <= available {
            return Ok(());
        }
        Err(FuselmError::MemoryBudget {
            needed: need.total,
            available,
            detail: format!(
                "the model needs {} (weights {}, KV cache {} for nCtx {}, activations {}, other {}); \
                 the budget of {} leaves {} after {} held by the models already loaded",
                mib(need.total),
                mib(need.weights),
                mib(need.kv_cache),
                n_ctx,
                mib(need.activations),
                mib(need.other),
                mib(self.budget),
                mib(available),
                mib(self.in_use),
            ),
        })
    }
}

/// Bytes as MiB with one decimal.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}
