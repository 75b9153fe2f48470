//! Reading GPU buffers back to the host, the same way natively and in browsers.
//!
//! Natively `device.poll(wait)` drives the map callback; in a browser the callback fires from the
//! event loop, so we await a oneshot channel either way.

use crate::error::{FuselmError, Result};

/// Copies `size` bytes at `offset` of `src` (which needs COPY_SRC) into a staging buffer and
/// returns them. `offset` and `size` must be multiples of 4.
pub async fn read_buffer(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    src: &wgpu::Buffer,
    offset: u64,
    size: u64,
) -> Result<Vec<u8>> {
    let mut encoder = device.create_command_encoder(&Default::default());
    let read = StagedRead::copy(device, &mut encoder, src, offset, size);
    let index = queue.submit([encoder.finish()]);
    // The staging buffer is destroyed when the read drops: freed now, not when a browser's
    // garbage collector gets to the JS object.
    read.submitted(index).read(device).await
}

/// Maps a MAP_READ buffer and waits until the map completes (or fails).
pub(crate) async fn map_read(device: &wgpu::Device, buffer: &wgpu::Buffer) -> Result<()> {
    map_read_after(device, buffer, None).await
}

/// [`map_read`] that natively waits only for `submission` (else for everything submitted).
async fn map_read_after(
    device: &wgpu::Device,
    buffer: &wgpu::Buffer,
    submission: Option<wgpu::SubmissionIndex>,
) -> Result<()> {
    map_read_range_after(device, buffer, 0..buffer.size(), submission).await
}

/// [`map_read_after`] of `range` of the buffer.
async fn map_read_range_after(
    device: &wgpu::Device,
    buffer: &wgpu::Buffer,
    range: std::ops::Range<u64>,
    submission: Option<wgpu::SubmissionIndex>,
) -> Result<()> {
    let (tx, rx) = futures_channel::oneshot::channel();
    buffer.map_async(wgpu::MapMode::Read, range, move |r| {
        let _ = tx.send(r);
    });
    #[cfg(not(target_arch = "wasm32"))]
    device
        .poll(wgpu::PollType::Wait {
            submission_index: submission,
            timeout: None,
        })
        .map_err(|e| FuselmError::Gpu(format!("poll: {e}")))?;
    #[cfg(target_arch = "wasm32")]
    let _ = submission;
    #[cfg(target_arch = "wasm32")]
    let _ = device;
    match rx.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(FuselmError::Gpu(format!("buffer map failed: {e}"))),
        Err(_) => Err(FuselmError::Gpu(
            "buffer map callback dropped (device lost?)".into(),
        )),
    }
}

/// Staging buffers kept for reuse by [`StagedRead::copy_pooled`]: creating a MAP_READ buffer
/// per readback cost ~0.2 ms of host time through Dawn (a V8 profile of simulation
/// generations on the H200, bench/NOTES.md), more than the rest of a small generation's host
/// work. A buffer goes back to the pool only after a completed read (mapped, copied out,
/// unmapped); one dropped mid-way, possibly still pending a map, is destroyed instead. Reads
/// in flight at once each take their own buffer, so overlapping calls never share one.
#[derive(Clone, Default)]
pub struct StagingPool {
    free: std::sync::Arc<std::sync::Mutex<Vec<wgpu::Buffer>>>,
}

/// Buffers a pool keeps at most (reads in flight at once beyond this get fresh buffers that
/// are destroyed after use).
const POOL_MAX: usize = 4;

impl StagingPool {
    /// The smallest free buffer of at least `size` bytes, else a new one of `size` rounded up to
    /// a power of two (at least 256 bytes), so reads of nearby sizes share buffers.
    fn take(&self, device: &wgpu::Device, size: u64) -> wgpu::Buffer {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        // The smallest that fits, so small reads leave large buffers to large reads.
        let fit = (0..free.len())
            .filter(|&i| free[i].size() >= size)
            .min_by_key(|&i| free[i].size());
        if let Some(i) = fit {
            return free.swap_remove(i);
        }
        drop(free);
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("fuselm pooled readback"),
            size: size.max(256).next_power_of_two(),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Buffers kept for reuse now.
    pub fn kept(&self) -> usize {
        self.free.lock().map(|f| f.len()).unwrap_or(0)
    }

    fn give_back(&self, buffer: wgpu::Buffer) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < POOL_MAX {
            free.push(buffer);
        } else {
            buffer.destroy();
        }
    }
}

impl Drop for StagingPool {
    fn drop(&mut self) {
        // The last handle frees the kept buffers now, not at a browser's garbage collection.
        if std::sync::Arc::strong_count(&self.free) == 1 {
            let free = self.free.lock().map(|mut f| std::mem::take(&mut *f));
            for b in free.unwrap_or_default() {
                b.destroy();
            }
        }
    }
}

/// A copy into a staging buffer recorded into the caller's encoder, read once the submission
/// that carries it has run — so a readback can ride along with the work that produces the
/// data, and the host can queue more work before waiting for it. The staging buffer is
/// destroyed when the read is dropped (read or not): in browsers a dropped wgpu buffer would
/// otherwise hold its GPU memory until garbage collection (one vocabulary of logits per token
/// for the unfused strategy) — or, with [`StagedRead::copy_pooled`], returned to its pool
/// after a completed read.
pub struct StagedRead {
    staging: Option<wgpu::Buffer>,
    size: u64,
    submission: Option<wgpu::SubmissionIndex>,
    pool: Option<StagingPool>,
    /// Set once the bytes were copied out and the buffer unmapped: only then may it be reused.
    done: bool,
}

impl Drop for StagedRead {
    fn drop(&mut self) {
        if let Some(b) = self.staging.take() {
            match (&self.pool, self.done) {
                (Some(pool), true) => pool.give_back(b),
                _ => b.destroy(),
            }
        }
    }
}

impl StagedRead {
    /// Records a copy of `size` bytes at `offset` of `src` (multiples of 4).
    pub fn copy(
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        src: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> Self {
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("fuselm staged readback"),
            size: size.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Self::recorded(encoder, src, offset, size, staging, None)
    }

    /// [`StagedRead::copy`] into a buffer taken from `pool` (returned there after the read).
    pub fn copy_pooled(
        device: &wgpu::Device,
        pool: &StagingPool,
        encoder: &mut wgpu::CommandEncoder,
        src: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> Self {
        let staging = pool.take(device, size.max(4));
        Self::recorded(encoder, src, offset, size, staging, Some(pool.clone()))
    }

    /// Records copies of several ranges `(src, offset, size)` (multiples of 4) into one staging
    /// buffer, one after another: [`StagedRead::read`] returns their bytes concatenated.
    pub fn gather(
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        ranges: &[(&wgpu::Buffer, u64, u64)],
    ) -> Self {
        let size: u64 = ranges.iter().map(|r| r.2).sum();
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("fuselm gathered readback"),
            size: size.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut at = 0;
        for &(src, offset, len) in ranges {
            encoder.copy_buffer_to_buffer(src, offset, &staging, at, len);
            at += len;
        }
        Self {
            staging: Some(staging),
            size,
            submission: None,
            pool: None,
            done: false,
        }
    }

    /// Records the copy into `staging` and wraps it.
    fn recorded(
        encoder: &mut wgpu::CommandEncoder,
        src: &wgpu::Buffer,
        offset: u64,
        size: u64,
        staging: wgpu::Buffer,
        pool: Option<StagingPool>,
    ) -> Self {
        encoder.copy_buffer_to_buffer(src, offset, &staging, 0, size);
        Self {
            staging: Some(staging),
            size,
            submission: None,
            pool,
            done: false,
        }
    }

    /// The submission that carries the copy: natively, reading waits for that submission only,
    /// not for work queued after it.
    pub fn submitted(mut self, index: wgpu::SubmissionIndex) -> Self {
        self.submission = Some(index);
        self
    }

    /// Waits for the copy (submit it first) and returns the bytes.
    pub async fn read(mut self, device: &wgpu::Device) -> Result<Vec<u8>> {
        let submission = self.submission.take();
        let Some(staging) = self.staging.as_ref() else {
            unreachable!("the staging buffer is only taken on drop")
        };
        // A pooled buffer may be larger than this read: map and copy only what was written.
        let range = 0..self.size.max(4);
        map_read_range_after(device, staging, range.clone(), submission).await?;
        let mut bytes = staging
            .get_mapped_range(range)
            .map_err(|e| FuselmError::Gpu(format!("readback: {e}")))?
            .to_vec();
        staging.unmap();
        self.done = true;
        bytes.truncate(self.size as usize); // a zero-byte read mapped 4 bytes
        Ok(bytes)
    }
}
