//! Context shift: a generation or a conversation that would pass `nCtx` keeps its first `keep`
//! tokens, drops the oldest of the rest and goes on, with the KV rows that stay moved down and
//! their keys re-rotated on the GPU (`kernels::KvShift`), so nothing is prefilled again.
//! llama.cpp's context shift is the reference behaviour: each shift drops half of the tokens
//! after `keep` (fewer shifts, each costing one pass over the cache).
//!
//! What a shifted cache holds is what llama.cpp's holds: every kept row as it was computed
//! (with the dropped tokens still in its context) at its new position. The plain CPU reference
//! follows the same rule (`CpuModel::shift_context`), and the tests compare the two.

use super::generation::{Segment, StopReason, TokenGeneration};
use super::gpu_model::{GenerationRequest, GpuModel};
use super::strategy::Strategy;
use crate::error::{FuselmError, Result};
use crate::gguf::RopeStyle as GgufRope;
use crate::kernels::{KvFormat, KvShift, Res, RopeStyle, ShiftRegion, ShiftRotation, ShiftRows};

/// How a generation goes on past `nCtx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextShift {
    /// Tokens at the start that are never dropped (the system prompt; at least the first
    /// token is kept, whatever this says).
    pub keep: u32,
}

/// Tokens to drop from a context of `n` tokens whose first `keep` stay, so that `room` more
/// fit in `n_ctx`: half of those after `keep` (llama.cpp's `n_discard = n_left / 2`), or more
/// when `room` needs it. None when even dropping all but the last token would not make room.
pub fn tokens_to_drop(n: u32, keep: u32, room: u32, n_ctx: u32) -> Option<u32> {
    let keep = keep.clamp(1, n.saturating_sub(1).max(1));
    // The last token always stays (its logits choose the next one).
    let droppable = n.checked_sub(keep + 1)?;
    let needed = (n + room).saturating_sub(n_ctx);
    let drop = (n.saturating_sub(keep) / 2).max(needed);
    (drop <= droppable && drop > 0).then_some(drop)
}

impl GpuModel {
    /// The tokens whose KV rows the cache holds (what a generation with `reuse_prefix` can
    /// keep): the last generation's prompt and output but its last token, after any shift.
    pub fn cached_tokens(&self) -> &[u32] {
        &self.kv_valid
    }

    /// Generation that goes on past `nCtx` when `shift` is given (else [`GpuModel::generate`]'s
    /// typed error): the first `shift.keep` tokens stay, older ones after them are dropped as
    /// the context fills. `TokenGeneration::dropped_tokens` says how many were.
    pub async fn generate_shifting(
        &mut self,
        req: &GenerationRequest<'_>,
        shift: Option<ContextShift>,
        on_token: &mut dyn FnMut(u32) -> bool,
        keep_going: &dyn Fn() -> bool,
    ) -> Result<TokenGeneration> {
        let n_ctx = self.n_ctx();
        // A conversation a shift already shortened goes on from its shortened cache: the
        // prompt that repeats what the cache stands for (the tokens before the shift) plus a
        // new turn becomes the cached tokens plus that turn.
        let mut seq = req.prompt.to_vec();
        if let (Some(_), true, Some((cached, origin))) = (shift, req.reuse_prefix, &self.kv_origin)
        {
            if *cached == self.kv_valid && req.prompt.starts_with(origin) {
                seq = [cached.as_slice(), &req.prompt[origin.len()..]].concat();
            }
        }
        let fits = seq.len() as u64 + u64::from(req.max_tokens) <= u64::from(n_ctx);
        let first = Segment {
            prompt: req.prompt,
            max_tokens: req.max_tokens,
            reuse_prefix: req.reuse_prefix,
            seed_mix: 0,
            constraint_state: None,
        };
        let unshifted = seq.is_empty() || (fits && seq == req.prompt);
        let Some(shift) = shift.filter(|_| !unshifted) else {
            self.kv_origin = None;
            return self.run_segment(req, &first, on_token, keep_going).await;
        };
        let keep = shift.keep.max(1);
        if keep >= n_ctx.saturating_sub(1) {
            return Err(FuselmError::InvalidArgument(format!(
                "keepTokens ({keep}) leaves no room in nCtx ({n_ctx}) for a context shift"
            )));
        }
        let mut remaining = req.max_tokens;
        let mut reuse = req.reuse_prefix;
        let mut total: Option<TokenGeneration> = None;
        let mut state = None;
        for segment in 0u32.. {
            if seq.len() as u32 >= n_ctx {
                let n = seq.len() as u32;
                let drop = tokens_to_drop(n, keep, 1, n_ctx).ok_or_else(|| {
                    FuselmError::InvalidArgument(format!(
                        "keepTokens ({keep}) leaves no room in nCtx ({n_ctx}) for a context shift"
                    ))
                })?;
                let keep = keep.min(n - 1);
                self.shift_cached(&seq, reuse, keep, drop).await?;
                seq.drain(keep as usize..(keep + drop) as usize);
                reuse = true;
            }
            let seg = Segment {
                prompt: &seq,
                max_tokens: remaining.min(n_ctx - seq.len() as u32),
                reuse_prefix: reuse,
                seed_mix: segment.wrapping_mul(0x9E37_79B9),
                constraint_state: state,
            };
            let out = self.run_segment(req, &seg, on_token, keep_going).await?;
            // The cache now holds this generation's rows: a shift keeps them.
            reuse = true;
            remaining -= out.tokens.len() as u32;
            seq.extend_from_slice(&out.tokens);
            if let Some(c) = req.constraint {
                let a = &c.automaton;
                let from = state.unwrap_or_else(|| a.start());
                state = Some(out.tokens.iter().fold(from, |s, &t| a.advance(s, t)));
            }
            let more = out.stop_reason == StopReason::Length && remaining > 0;
            total = Some(match total {
                None => out,
                Some(t) => merge(t, out),
            });
            if !more {
                break;
            }
        }
        let mut out = total.expect("at least one segment ran");
        // Tokens of the prompt and output no longer in the context (earlier turns' shifts too).
        let full = [req.prompt, &out.tokens].concat();
        out.dropped_tokens = (full.len() - seq.len()) as u32;
        self.kv_origin = self.origin_of(&full, out.dropped_tokens as usize, keep as usize);
        Ok(out)
    }

    /// The tokens the shifted cache stands for: `full` (a generation's prompt and output) up to
    /// the cached tokens plus the `dropped` ones, when dropping `keep..keep + dropped` from it
    /// gives the cache exactly.
    fn origin_of(&self, full: &[u32], dropped: usize, keep: usize) -> Option<(Vec<u32>, Vec<u32>)> {
        let cached = &self.kv_valid;
        let origin = full.get(..cached.len() + dropped)?;
        let keep = keep.min(cached.len());
        let same = dropped > 0
            && origin[..keep] == cached[..keep]
            && origin[keep + dropped..] == cached[keep..];
        same.then(|| (cached.clone(), origin.to_vec()))
    }

    /// Makes the KV cache hold `seq` with tokens `keep..keep + drop` dropped: the rows of
    /// `seq`'s prefix already cached (with `reuse`) are moved and re-rotated on the GPU; the
    /// rest will be prefilled.
    async fn shift_cached(&mut self, seq: &[u32], reuse: bool, keep: u32, drop: u32) -> Result<()> {
        let cached = if reuse {
            self.kv_valid
                .iter()
                .zip(seq)
                .take_while(|(a, b)| a == b)
                .count() as u32
        } else {
            0
        };
        self.kv_valid.truncate(cached as usize);
        if cached <= keep + drop {
            self.kv_valid.truncate(cached.min(keep) as usize);
            return Ok(());
        }
        self.shift_context(keep, drop).await
    }

    /// Drops the cached tokens `keep..keep + drop` (of those the last generation or a restored
    /// session left, [`GpuModel::cached_tokens`]) from every KV cache holding them, moving the
    /// later rows down with their keys re-rotated to their new positions on the GPU; a next
    /// generation with `reuse_prefix` goes on from the shortened context. A range outside the
    /// cached tokens is an error that leaves the cache as it was.
    pub async fn shift_context(&mut self, keep: u32, drop: u32) -> Result<()> {
        let n = self.kv_valid.len() as u32;
        if drop == 0 || keep + drop > n {
            return Err(FuselmError::InvalidArgument(format!(
                "context shift: cannot drop {drop} of {n} cached tokens after {keep}"
            )));
        }
        let owners = self.kv_caches.clone();
        // The shared cache has the load's format; the megakernels' own is f32.
        let format = |owner: Option<Strategy>| owner.map_or(self.shared.kv, |_| KvFormat::F32);
        for &owner in &owners {
            let kv = format(owner);
            if !self.kv_shifts.iter().any(|k| k.format() == kv) {
                let kernel = KvShift::new(&self.shared.ctx, kv).await?;
                self.kv_shifts.push(kernel);
            }
        }
        let rows = ShiftRows { keep, drop, n };
        let ctx = &self.shared.ctx;
        let mut calls = Vec::new();
        for &owner in &owners {
            let kernel = self
                .kv_shifts
                .iter()
                .find(|k| k.format() == format(owner))
                .ok_or_else(|| FuselmError::Gpu("context shift: no kernel for a cache".into()))?;
            for (region, rotation) in self.shift_regions(owner)? {
                calls.push(kernel.bind(ctx, region, rows, rotation)?);
            }
        }
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for call in &calls {
                call.record(&mut pass);
            }
        }
        ctx.queue.submit([encoder.finish()]);
        for call in &calls {
            call.release(ctx);
        }
        self.kv_valid.drain(keep as usize..(keep + drop) as usize);
        Ok(())
    }

    /// Each (layer, K or V) region of the cache `owner` names (None: the shared one), with the
    /// rotation its keys carry.
    fn shift_regions(
        &self,
        owner: Option<Strategy>,
    ) -> Result<Vec<(ShiftRegion<'_>, Option<ShiftRotation<'_>>)>> {
        let c = &self.shared.config;
        let a = &self.shared.acts;
        let style = match c.rope_style {
            GgufRope::Norm => RopeStyle::Normal,
            GgufRope::NeoX => RopeStyle::Neox,
        };
        let factors = self.shared.weights.rope_factors_for(c, a.n_ctx);
        let rotation = |l: u32| {
            let (_, freq_base) = c.layer_attention(l);
            ShiftRotation {
                n_rot: c.rope_dims,
                freq_base,
                freq_scale: c.layer_rope_scale(l),
                style,
                factors,
            }
        };
        let mut out = Vec::with_capacity(2 * c.n_layers as usize);
        let per_layer = u64::from(c.n_head_kv) * u64::from(a.n_ctx) * u64::from(c.head_dim);
        let own = match owner {
            None => None,
            Some(s) => Some(self.strategies.get(s).own_kv().ok_or_else(|| {
                FuselmError::Gpu(format!("the {} strategy's KV cache is not built", s.name()))
            })?),
        };
        for l in 0..c.n_layers {
            let li = l as usize;
            let (k, v, k_base, v_base) = match own {
                None => (Res::from(&a.k_cache[li]), Res::from(&a.v_cache[li]), 0, 0),
                // The megakernels' own cache: one f32 buffer, per layer K then V.
                Some(buffer) => (
                    Res::from(buffer),
                    Res::from(buffer),
                    2 * u64::from(l) * per_layer,
                    (2 * u64::from(l) + 1) * per_layer,
                ),
            };
            for (cache, base, rot) in [(k, k_base, Some(rotation(l))), (v, v_base, None)] {
                out.push((
                    ShiftRegion {
                        cache,
                        base,
                        heads: c.n_head_kv,
                        n_ctx: a.n_ctx,
                        head_dim: c.head_dim,
                    },
                    rot,
                ));
            }
        }
        Ok(out)
    }
}

/// Two runs of one generation as one result (the second continued the first after a shift).
fn merge(mut a: TokenGeneration, b: TokenGeneration) -> TokenGeneration {
    a.tokens.extend(b.tokens);
    a.stop_reason = b.stop_reason;
    a.stop_token = b.stop_token;
    // The second run's prefill (the shifted context's last token) is decode time here.
    a.decode_seconds += b.prefill_seconds + b.decode_seconds;
    a.dispatches += b.dispatches;
    a.submits += b.submits;
    a.decode_steps += b.decode_steps;
    a.record_seconds += b.record_seconds;
    a.logprobs.extend(b.logprobs);
    a
}

#[cfg(test)]
mod tests {
    use super::tokens_to_drop;

    #[test]
    fn a_shift_drops_half_of_what_follows_keep() {
        // 64 of 64 with 4 kept: 30 of the 60 after them.
        assert_eq!(tokens_to_drop(64, 4, 1, 64), Some(30));
        // A prompt far past nCtx drops what it must, the last token stays.
        assert_eq!(tokens_to_drop(200, 4, 1, 64), Some(137));
        assert_eq!(tokens_to_drop(200, 4, 1, 64).map(|d| 200 - d + 1), Some(64));
        // The first token is kept even when keep says 0.
        assert_eq!(tokens_to_drop(10, 0, 1, 10), Some(4));
        // Nothing droppable: None.
        assert_eq!(tokens_to_drop(5, 4, 1, 5), None);
        assert_eq!(tokens_to_drop(300, 4, 1, 5), None);
    }
}
