//! Bounds-checked little-endian reader over a byte slice.
//!
//! Two modes share one code path so whole-file and streaming parses cannot disagree:
//! * complete: the slice is the whole file; running out of bytes is a `Truncated` error and
//!   any declared length or count is checked against the bytes actually left.
//! * prefix: the slice is the start of a download; running out of bytes is still reported
//!   as `Truncated` (the caller maps it to "need more"), while declared lengths are checked
//!   against `limit` (the maximum header size) so a hostile length fails immediately
//!   instead of making the caller buffer forever.
//!
//! Every length is validated *before* anything is allocated, and capacities are reserved
//! only for what the bytes already present could hold.

use super::error::GgufError;

pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Logical end used to judge declared lengths (file length, or the header size limit).
    limit: u64,
    /// `false` in prefix mode: reading past `buf` may succeed once more bytes arrive.
    complete: bool,
}

impl<'a> Cursor<'a> {
    pub fn complete(buf: &'a [u8]) -> Self {
        Cursor {
            buf,
            pos: 0,
            limit: buf.len() as u64,
            complete: true,
        }
    }

    pub fn prefix(buf: &'a [u8], max_header: u64) -> Self {
        Cursor {
            buf,
            pos: 0,
            limit: max_header,
            complete: false,
        }
    }

    pub fn pos(&self) -> u64 {
        self.pos as u64
    }

    /// Bytes the declared lengths may still use (logical, not necessarily present yet).
    fn logical_left(&self) -> u64 {
        self.limit.saturating_sub(self.pos as u64)
    }

    /// Bytes actually present after the cursor.
    fn present_left(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    /// A safe `Vec` capacity for `count` items of at least `min_size` bytes each: never more
    /// than the bytes already present could encode.
    pub fn capacity_for(&self, count: u64, min_size: u64) -> usize {
        let fit = self.present_left() / min_size.max(1);
        usize::try_from(count.min(fit)).unwrap_or(0)
    }

    pub fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], GgufError> {
        let offset = self.pos as u64;
        if !self.complete && offset.saturating_add(n) > self.limit {
            return Err(GgufError::HeaderTooLarge { limit: self.limit });
        }
        if n > self.present_left() {
            return Err(GgufError::Truncated {
                offset,
                what,
                needed: n,
                available: self.present_left(),
            });
        }
        let start = self.pos;
        let end = start + n as usize; // n <= present_left, so this fits in usize
        self.pos = end;
        Ok(&self.buf[start..end])
    }

    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], GgufError> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, GgufError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// Checks a declared byte length against the logical bytes left.
    pub fn check_len(&self, len: u64, offset: u64, what: &'static str) -> Result<(), GgufError> {
        let available = self.logical_left();
        if len > available {
            return Err(GgufError::LengthPastEnd {
                what,
                offset,
                len,
                available,
            });
        }
        Ok(())
    }

    /// Checks a declared item count against how many items of `min_size` bytes could fit.
    pub fn check_count(
        &self,
        count: u64,
        min_size: u64,
        offset: u64,
        what: &'static str,
    ) -> Result<(), GgufError> {
        let max = self.logical_left() / min_size.max(1);
        if count > max {
            return Err(GgufError::CountTooLarge {
                what,
                offset,
                count,
                max,
            });
        }
        Ok(())
    }

    /// A GGUF string: u64 byte length + UTF-8 bytes (no terminator).
    pub fn string(&mut self, what: &'static str) -> Result<String, GgufError> {
        let offset = self.pos();
        let len = self.u64(what)?;
        self.check_len(len, offset, what)?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| GgufError::InvalidUtf8 { what, offset })
    }
}
