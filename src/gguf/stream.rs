//! Incremental GGUF parsing for downloads: push chunks as they arrive, get the header as
//! soon as it is complete and each tensor's bytes as soon as that tensor is complete.
//!
//! Memory: before the header is parsed the reader buffers the prefix (bounded by
//! `max_header_bytes`); afterwards it holds only the tensor currently being filled, so a
//! model is never held twice. Tensors are emitted in file-offset order; padding between
//! them and trailing bytes after the last one are skipped.
//!
//! Re-parsing the header on every chunk would be quadratic for small chunks, so a failed
//! attempt is retried only once the buffer reaches the byte count the parser asked for and
//! has grown by half since the last try; `finish` makes a final attempt. The header is thus
//! reported at most ~1.5x its size late, and parsing stays linear overall.

use super::error::GgufError;
use super::reader::{parse_prefix, Gguf, DEFAULT_MAX_HEADER_BYTES};

/// Something the stream produced.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// The header and tensor directory (emitted once, first).
    Header(Box<Gguf>),
    /// All bytes of tensor `index` (its index in [`Gguf::tensors`]).
    Tensor { index: usize, data: Vec<u8> },
}

enum State {
    Header { buf: Vec<u8>, retry_at: usize },
    Data(DataState),
    Failed(GgufError),
}

struct DataState {
    /// (directory index, absolute offset, size) of tensors not yet complete, in reverse
    /// offset order so the next one is `pop`ped.
    pending: Vec<(usize, u64, u64)>,
    /// Bytes of the tensor at the end of `pending` received so far.
    cur: Vec<u8>,
    /// The file's length, when the caller knows it (see [`GgufStreamReader::expect_len`]).
    file_len: Option<u64>,
}

/// Streaming GGUF reader. See the module docs.
pub struct GgufStreamReader {
    max_header: u64,
    /// Absolute file offset of the next byte to be pushed.
    pos: u64,
    header: Option<Gguf>,
    state: State,
    file_len: Option<u64>,
}

impl Default for GgufStreamReader {
    fn default() -> Self {
        GgufStreamReader::new()
    }
}

/// Smallest buffer allocation for a tensor, to avoid many tiny reallocations.
const MIN_ALLOC: usize = 4096;

impl GgufStreamReader {
    pub fn new() -> Self {
        Self::with_max_header_bytes(DEFAULT_MAX_HEADER_BYTES)
    }

    pub fn with_max_header_bytes(max_header: u64) -> Self {
        GgufStreamReader {
            max_header,
            pos: 0,
            header: None,
            file_len: None,
            state: State::Header {
                buf: Vec::new(),
                retry_at: 0,
            },
        }
    }

    /// The parsed header, once available.
    pub fn header(&self) -> Option<&Gguf> {
        self.header.as_ref()
    }

    /// The caller knows the file is `len` bytes long (a content-length, a Blob's size): tensors
    /// inside it get their whole buffer when their first byte arrives, instead of growing into it.
    pub fn expect_len(&mut self, len: u64) {
        self.file_len = Some(len);
        if let State::Data(d) = &mut self.state {
            d.file_len = Some(len);
        }
    }

    /// Total bytes pushed so far.
    pub fn bytes_received(&self) -> u64 {
        self.pos
    }

    /// Feeds the next chunk of the file. After an error the reader keeps returning it.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<StreamEvent>, GgufError> {
        let mut events = Vec::new();
        let result = self.push_inner(chunk, &mut events, false);
        self.fail_on(result).map(|()| events)
    }

    /// Ends the stream: emits anything still pending and fails with `Truncated` if the header
    /// or any tensor is incomplete.
    pub fn finish(mut self) -> Result<Vec<StreamEvent>, GgufError> {
        let mut events = Vec::new();
        self.push_inner(&[], &mut events, true)?;
        match &self.state {
            State::Data(d) => match d.pending.last() {
                None => Ok(events),
                Some(&(_, offset, size)) => Err(GgufError::Truncated {
                    offset: self.pos,
                    what: "tensor data",
                    needed: (offset + size).saturating_sub(self.pos),
                    available: 0,
                }),
            },
            State::Failed(e) => Err(e.clone()),
            // push_inner with `last` never leaves the header state without an error.
            State::Header { buf, .. } => Err(GgufError::Truncated {
                offset: buf.len() as u64,
                what: "header",
                needed: 1,
                available: 0,
            }),
        }
    }

    fn fail_on(&mut self, r: Result<(), GgufError>) -> Result<(), GgufError> {
        if let Err(e) = &r {
            self.state = State::Failed(e.clone());
        }
        r
    }

    fn push_inner(
        &mut self,
        chunk: &[u8],
        events: &mut Vec<StreamEvent>,
        last: bool,
    ) -> Result<(), GgufError> {
        match &mut self.state {
            State::Failed(e) => Err(e.clone()),
            State::Data(d) => {
                d.feed(&mut self.pos, chunk, events);
                Ok(())
            }
            State::Header { buf, retry_at } => {
                buf.extend_from_slice(chunk);
                self.pos += chunk.len() as u64;
                if buf.len() < *retry_at && !last {
                    return Ok(());
                }
                let gguf = match parse_prefix(buf, self.max_header)? {
                    Ok(g) => g,
                    Err(needed_end) if last => {
                        let offset = buf.len() as u64;
                        let needed = needed_end.saturating_sub(offset).max(1);
                        return Err(GgufError::Truncated {
                            offset,
                            what: "header",
                            needed,
                            available: 0,
                        });
                    }
                    Err(needed_end) => {
                        let grown = buf.len().saturating_add(buf.len() / 2);
                        *retry_at = usize::try_from(needed_end).unwrap_or(usize::MAX).max(grown);
                        return Ok(());
                    }
                };
                // A tensor must fit in one buffer on this platform (4 GiB on wasm32).
                if let Some(t) = gguf
                    .tensors()
                    .iter()
                    .find(|t| t.size_bytes > isize::MAX as u64)
                {
                    return Err(GgufError::TensorTooLarge {
                        name: t.name.clone(),
                        size_bytes: t.size_bytes,
                    });
                }
                let buf = std::mem::take(buf);
                let mut pending: Vec<(usize, u64, u64)> = gguf
                    .tensors_by_offset()
                    .into_iter()
                    .map(|i| (i, gguf.tensors()[i].offset, gguf.tensors()[i].size_bytes))
                    .collect();
                pending.reverse();
                events.push(StreamEvent::Header(Box::new(gguf.clone())));
                self.header = Some(gguf);
                let mut d = DataState {
                    pending,
                    cur: Vec::new(),
                    file_len: self.file_len,
                };
                self.pos = 0;
                d.feed(&mut self.pos, &buf, events);
                self.state = State::Data(d);
                Ok(())
            }
        }
    }
}

impl DataState {
    /// Consumes `bytes`, which start at absolute offset `*pos`.
    fn feed(&mut self, pos: &mut u64, mut bytes: &[u8], events: &mut Vec<StreamEvent>) {
        while let Some(&(index, offset, size)) = self.pending.last() {
            if bytes.is_empty() {
                break;
            }
            // Skip padding (or the header) before the tensor starts.
            if *pos < offset {
                let skip = (offset - *pos).min(bytes.len() as u64);
                bytes = &bytes[skip as usize..];
                *pos += skip;
                continue;
            }
            let want = size - self.cur.len() as u64;
            let n = want.min(bytes.len() as u64) as usize;
            let len = self.cur.len();
            if self.cur.capacity() < len + n {
                // Grow geometrically but never past the declared size, and never by more than
                // what has actually arrived: the size is untrusted until the bytes exist. When the
                // caller vouched for the file's length and the tensor lies inside it, take the
                // whole buffer at once: geometric growth leaves the smaller blocks behind as holes
                // wasm's allocator cannot give back (memory would grow to several times the
                // largest tensor).
                let size_usize = usize::try_from(size).unwrap_or(usize::MAX);
                let target = if self
                    .file_len
                    .is_some_and(|l| offset.saturating_add(size) <= l)
                {
                    size_usize
                } else {
                    size_usize.min((2 * self.cur.capacity()).max(len + n).max(MIN_ALLOC))
                };
                self.cur.reserve_exact(target - len);
            }
            self.cur.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            *pos += n as u64;
            if self.cur.len() as u64 == size {
                self.pending.pop();
                events.push(StreamEvent::Tensor {
                    index,
                    data: std::mem::take(&mut self.cur),
                });
            }
        }
        // Trailing bytes after the last tensor are ignored.
        *pos += bytes.len() as u64;
    }
}
