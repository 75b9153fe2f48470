//! Saved sessions: the tokens a model's KV cache holds and those rows of the cache, as bytes
//! that restore it in another load of the same model (after a page reload, in another tab), so a
//! conversation goes on without prefilling it again.
//!
//! Format, version 1 (little-endian; `HEADER` bytes, then the tokens, the rows, a checksum):
//!
//! | bytes        | field                                                                 |
//! |--------------|-----------------------------------------------------------------------|
//! | 8            | magic `fuselmKV`                                                      |
//! | 4 × 7        | version (1), model identity, KV format (0 f32, 1 f16), layers, KV heads, head_dim, tokens `n` |
//! | 4 × n        | the token ids                                                         |
//! | 2·L·H·n·d·b  | per layer, K then V, per KV head: the `n` rows of `head_dim` values   |
//! | 4            | CRC-32 of everything before it                                        |
//!
//! The rows come from the cache the last generation used (the shared one of fused and unfused, in
//! the model's KV format, or a megakernel's own, f32) and go back into the shared one.
//!
//! The model identity is a CRC-32 over every weight tensor's name, type, shape and first
//! [`SAMPLE_BYTES`] bytes (the same whether the model was loaded whole or streamed): a session
//! saved with another model — another fine-tune of the same shape included — is refused, as are
//! damaged bytes (the checksum), another KV format, or more tokens than this load's `nCtx`.

use super::gpu_model::GpuModel;
use super::strategy::Strategy;
use crate::error::{FuselmError, Result};
use crate::gguf::TensorInfo;
use crate::gpu::StagedRead;
use crate::kernels::KvFormat;
use serde::{Deserialize, Serialize};

const MAGIC: &[u8; 8] = b"fuselmKV";
const VERSION: u32 = 1;
/// Magic and seven u32 fields.
const HEADER: usize = 8 + 4 * 7;
/// Bytes of each tensor's data the model identity covers.
pub const SAMPLE_BYTES: usize = 256;

/// What a saved or restored session holds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct SessionInfo {
    /// Tokens whose KV-cache rows the session carries: a generation whose prompt starts with
    /// them (with `reusePrefix`, as `chat.completions` does) prefills only what follows.
    pub tokens: u32,
    /// Size of the saved session in bytes.
    pub bytes: u64,
}

/// The model identity a session carries (see the module docs): feed every weight tensor the
/// load uploads, in any order.
#[derive(Debug, Default)]
pub struct Fingerprint {
    tensors: Vec<(String, u32)>,
}

impl Fingerprint {
    pub fn add(&mut self, t: &TensorInfo, data: &[u8]) {
        let mut h = crc32fast::Hasher::new();
        h.update(t.name.as_bytes());
        h.update(&t.type_id.to_le_bytes());
        for d in &t.dims {
            h.update(&d.to_le_bytes());
        }
        h.update(&data[..data.len().min(SAMPLE_BYTES)]);
        self.tensors.push((t.name.clone(), h.finalize()));
    }

    pub fn finish(mut self) -> u32 {
        self.tensors.sort();
        let mut h = crc32fast::Hasher::new();
        for (name, crc) in &self.tensors {
            h.update(name.as_bytes());
            h.update(&crc.to_le_bytes());
        }
        h.finalize()
    }
}

/// The layout of a session's rows for one model: what the header describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    identity: u32,
    kv: KvFormat,
    layers: u32,
    kv_heads: u32,
    head_dim: u32,
}

impl Layout {
    /// Bytes of one head's rows for `n` tokens.
    fn head_bytes(&self, n: u32) -> u64 {
        u64::from(n) * u64::from(self.head_dim) * self.kv.bytes()
    }

    /// Bytes of a whole session of `n` tokens.
    fn session_bytes(&self, n: u32) -> u64 {
        let rows = 2 * u64::from(self.layers) * u64::from(self.kv_heads) * self.head_bytes(n);
        HEADER as u64 + 4 * u64::from(n) + rows + 4
    }

    /// The magic and the header fields of a session of `n` tokens.
    fn header(&self, n: u32) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        let fields = [
            VERSION,
            self.identity,
            self.kv_code(),
            self.layers,
            self.kv_heads,
            self.head_dim,
            n,
        ];
        for field in fields {
            out.extend_from_slice(&field.to_le_bytes());
        }
        out
    }

    fn kv_code(&self) -> u32 {
        match self.kv {
            KvFormat::F32 => 0,
            KvFormat::F16 => 1,
        }
    }
}

fn session_error(what: impl Into<String>) -> FuselmError {
    FuselmError::Session(what.into())
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

/// The tokens of a session checked against `layout` and `n_ctx`, and where its rows start.
fn parse<'a>(bytes: &'a [u8], layout: &Layout, n_ctx: u32) -> Result<(Vec<u32>, &'a [u8])> {
    if bytes.len() < HEADER + 4 || &bytes[..8] != MAGIC {
        return Err(session_error(
            "these bytes are not a fuselm session (as model.saveSession() returns)",
        ));
    }
    let version = u32_at(bytes, 8);
    if version != VERSION {
        return Err(session_error(format!(
            "session format version {version}; this fuselm reads version {VERSION}"
        )));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(body) != u32_at(tail, 0) {
        return Err(session_error(
            "the session is damaged (its checksum does not match its bytes)",
        ));
    }
    let field = |i: usize| u32_at(bytes, 12 + 4 * i);
    let (identity, kv, layers, kv_heads, head_dim, n) =
        (field(0), field(1), field(2), field(3), field(4), field(5));
    if identity != layout.identity
        || (layers, kv_heads, head_dim) != (layout.layers, layout.kv_heads, layout.head_dim)
    {
        return Err(session_error(
            "the session was saved with another model (its weights differ from this one's)",
        ));
    }
    if kv != layout.kv_code() {
        let name = |code: u32| if code == 1 { "f16" } else { "f32" };
        return Err(session_error(format!(
            "the session holds an {} KV cache and this model keeps an {} one (loadModel's \
             kvF16 must match the load that saved it)",
            name(kv),
            name(layout.kv_code())
        )));
    }
    if n > n_ctx {
        return Err(session_error(format!(
            "the session holds {n} tokens, more than this model's nCtx ({n_ctx})"
        )));
    }
    if bytes.len() as u64 != layout.session_bytes(n) {
        return Err(session_error(format!(
            "the session is {} bytes, but its header describes {}",
            bytes.len(),
            layout.session_bytes(n)
        )));
    }
    let tokens_end = HEADER + 4 * n as usize;
    let tokens = bytes[HEADER..tokens_end]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok((tokens, &bytes[tokens_end..bytes.len() - 4]))
}

impl GpuModel {
    /// The session layout of this model with a cache in `kv`.
    fn session_layout(&self, kv: KvFormat) -> Layout {
        let c = &self.shared.config;
        Layout {
            identity: self.shared.weights.identity,
            kv,
            layers: c.n_layers,
            kv_heads: c.n_head_kv,
            head_dim: c.head_dim,
        }
    }

    /// The format of the KV cache `owner` names (the shared one for `None`), and where each
    /// head's rows start in it, in the session's order: per layer, K then V, per KV head.
    fn cache_rows(&self, owner: Option<Strategy>) -> Result<(KvFormat, Vec<(&wgpu::Buffer, u64)>)> {
        let a = &self.shared.acts;
        let c = &self.shared.config;
        let heads = u64::from(c.n_head_kv);
        let per_head = |kv: KvFormat| u64::from(a.n_ctx) * u64::from(c.head_dim) * kv.bytes();
        let Some(strategy) = owner else {
            let kv = self.shared.kv;
            let mut out = Vec::with_capacity(2 * a.k_cache.len() * heads as usize);
            for (k, v) in a.k_cache.iter().zip(&a.v_cache) {
                for view in [k, v] {
                    for h in 0..heads {
                        out.push((&view.buffer, view.offset + h * per_head(kv)));
                    }
                }
            }
            return Ok((kv, out));
        };
        // The megakernels' own cache is one f32 buffer in exactly this order.
        let buffer = self.strategies.get(strategy).own_kv().ok_or_else(|| {
            session_error(format!(
                "the {} strategy's KV cache is not built",
                strategy.name()
            ))
        })?;
        let rows = 2 * u64::from(c.n_layers) * heads;
        let out = (0..rows)
            .map(|i| (buffer, i * per_head(KvFormat::F32)))
            .collect();
        Ok((KvFormat::F32, out))
    }

    /// The tokens the KV cache holds (the last generation's prompt and output, but for its
    /// last token) and their rows, as bytes (see the module docs), from the cache that
    /// generation used: the shared one, or a megakernel's own (f32).
    pub async fn save_session(&self) -> Result<(Vec<u8>, SessionInfo)> {
        let n = self.kv_valid.len() as u32;
        let (kv, ranges) = if n == 0 {
            (self.shared.kv, Vec::new())
        } else {
            // Any of the caches holding them: the shared one when it is among them.
            let source = if self.kv_caches.contains(&None) {
                None
            } else {
                self.kv_caches.first().copied().flatten()
            };
            self.cache_rows(source)?
        };
        let layout = self.session_layout(kv);
        let head = layout.head_bytes(n);
        let ctx = &self.shared.ctx;
        let rows = if ranges.is_empty() {
            Vec::new()
        } else {
            let mut encoder = ctx.device.create_command_encoder(&Default::default());
            let sources: Vec<_> = ranges.iter().map(|&(b, o)| (b, o, head)).collect();
            let read = StagedRead::gather(&ctx.device, &mut encoder, &sources);
            let index = ctx.queue.submit([encoder.finish()]);
            read.submitted(index).read(&ctx.device).await?
        };
        let mut out = Vec::with_capacity(layout.session_bytes(n) as usize);
        out.extend_from_slice(&layout.header(n));
        for t in &self.kv_valid {
            out.extend_from_slice(&t.to_le_bytes());
        }
        out.extend_from_slice(&rows);
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        let info = SessionInfo {
            tokens: n,
            bytes: out.len() as u64,
        };
        Ok((out, info))
    }

    /// Restores a session saved by [`GpuModel::save_session`] of this model into the shared KV
    /// cache of fused and unfused, and — when the model's default strategy is a megakernel,
    /// with a cache of its own (built now if need be), and the session is f32 — into that one
    /// too; its tokens become the prefix the next generation reuses on either. Bytes of another
    /// model, another KV format, more tokens than `nCtx`, or damaged ones fail with kind
    /// "session" and leave the model as it was.
    pub async fn load_session(&mut self, bytes: &[u8]) -> Result<SessionInfo> {
        let layout = self.session_layout(self.shared.kv);
        let (tokens, rows) = parse(bytes, &layout, self.shared.acts.n_ctx)?;
        let n = tokens.len() as u32;
        let mut caches = vec![None];
        let (default, _) = self.default_strategy();
        if n > 0 && layout.kv == KvFormat::F32 && self.strategies.get(default).own_kv_cache() {
            let state = self.strategies.get_mut(default);
            // Not buildable here (a limit): the shared cache alone takes the session.
            if state.prepare(&self.shared).await.is_ok() && state.own_kv().is_some() {
                caches.push(Some(default));
            }
        }
        if n > 0 {
            let head = layout.head_bytes(n) as usize;
            for &cache in &caches {
                let (_, ranges) = self.cache_rows(cache)?;
                let queue = &self.shared.ctx.queue;
                for (i, (buffer, offset)) in ranges.into_iter().enumerate() {
                    queue.write_buffer(buffer, offset, &rows[i * head..(i + 1) * head]);
                }
            }
        }
        self.kv_caches = caches;
        self.kv_valid = tokens;
        Ok(SessionInfo {
            tokens: n,
            bytes: bytes.len() as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout {
            identity: 7,
            kv: KvFormat::F16,
            layers: 2,
            kv_heads: 3,
            head_dim: 4,
        }
    }

    /// A session of `n` tokens of `layout` with rows 0, 1, 2, ….
    fn session(layout: &Layout, n: u32) -> Vec<u8> {
        let mut out = layout.header(n);
        for t in 0..n {
            out.extend_from_slice(&(100 + t).to_le_bytes());
        }
        let rows = layout.session_bytes(n) as usize - out.len() - 4;
        out.extend((0..rows).map(|i| i as u8));
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    #[test]
    fn a_session_parses_into_its_tokens_and_rows() {
        let l = layout();
        let bytes = session(&l, 5);
        let (tokens, rows) = parse(&bytes, &l, 8).unwrap();
        assert_eq!(tokens, [100, 101, 102, 103, 104]);
        assert_eq!(rows.len() as u64, 2 * 2 * 3 * 5 * 4 * 2);
        assert_eq!(rows[..3], [0, 1, 2]);
    }

    #[test]
    fn damaged_foreign_and_oversized_sessions_are_refused() {
        let l = layout();
        let bytes = session(&l, 5);
        let err = |b: &[u8], l: &Layout, n_ctx: u32| {
            let e = parse(b, l, n_ctx).unwrap_err();
            assert_eq!(e.kind().as_str(), "session");
            e.to_string()
        };
        assert!(err(&bytes[..10], &l, 8).contains("not a fuselm session"));
        assert!(err(b"something else entirely, long enough", &l, 8).contains("not a fuselm"));
        let mut flipped = bytes.clone();
        flipped[HEADER + 30] ^= 1;
        assert!(err(&flipped, &l, 8).contains("damaged"));
        let mut cut = bytes[..bytes.len() - 9].to_vec();
        let crc = crc32fast::hash(&cut);
        cut.extend_from_slice(&crc.to_le_bytes());
        assert!(err(&cut, &l, 8).contains("header describes"));
        let other = Layout { identity: 8, ..l };
        assert!(err(&bytes, &other, 8).contains("another model"));
        let wider = Layout { head_dim: 8, ..l };
        assert!(err(&bytes, &wider, 8).contains("another model"));
        let f32 = Layout {
            kv: KvFormat::F32,
            ..l
        };
        assert!(err(&bytes, &f32, 8).contains("f16 KV cache and this model keeps an f32"));
        assert!(err(&bytes, &l, 4).contains("more than this model's nCtx (4)"));
        let mut v2 = bytes.clone();
        v2[8] = 2;
        let crc = crc32fast::hash(&v2[..v2.len() - 4]);
        let at = v2.len() - 4;
        v2[at..].copy_from_slice(&crc.to_le_bytes());
        assert!(err(&v2, &l, 8).contains("version 2"));
    }

    #[test]
    fn an_empty_session_parses() {
        let l = layout();
        let bytes = session(&l, 0);
        let (tokens, rows) = parse(&bytes, &l, 8).unwrap();
        assert!(tokens.is_empty() && rows.is_empty());
    }

    #[test]
    fn the_fingerprint_ignores_order_and_sees_every_sampled_byte() {
        let t = |name: &str| TensorInfo {
            name: name.into(),
            dims: vec![4, 2],
            type_id: 0,
            ty: None,
            offset: 0,
            size_bytes: 32,
            n_elements: 8,
        };
        let data = [1u8; 32];
        let fp = |order: &[(&str, &[u8])]| {
            let mut f = Fingerprint::default();
            for (name, d) in order {
                f.add(&t(name), d);
            }
            f.finish()
        };
        let a = fp(&[("a", &data), ("b", &data)]);
        assert_eq!(a, fp(&[("b", &data), ("a", &data)]));
        let mut other = data;
        other[31] = 2;
        assert_ne!(a, fp(&[("a", &data), ("b", &other)]));
        assert_ne!(a, fp(&[("a", &data), ("c", &data)]));
    }
}
