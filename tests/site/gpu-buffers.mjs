// Counts a page's live GPU buffers and their bytes: an init script (page.addInitScript) wraps
// GPUDevice.prototype.createBuffer, GPUBuffer.prototype.destroy and GPUDevice.prototype.destroy
// (which destroys every buffer of the device) before any page script runs. A buffer is live from
// createBuffer until it is destroyed or its JS object is garbage-collected (Chromium then frees its
// GPU memory); the tracker holds buffers only through WeakRefs, so it keeps none alive. Before GC
// runs, a buffer that was merely dropped still holds its memory, and counts.

/**
 * The init script. Exposes `window.__gpuBuffers()` → { count, bytes, created, destroyed, collected }:
 * live buffers and their bytes, and how many were ever created, destroyed (by `destroy()` or their
 * device's) and collected without being destroyed.
 */
export function trackGpuBuffers() {
  if (typeof GPUDevice === "undefined") return;
  const entries = new Set(); // { ref: WeakRef<GPUBuffer>, size, device: WeakRef<GPUDevice> }
  const entryOf = new WeakMap(); // GPUBuffer -> entry
  let created = 0, destroyed = 0, collected = 0;
  const forget = (entry) => {
    if (entries.delete(entry)) destroyed++;
  };
  const createBuffer = GPUDevice.prototype.createBuffer;
  GPUDevice.prototype.createBuffer = function (descriptor) {
    const buffer = createBuffer.call(this, descriptor);
    const entry = { ref: new WeakRef(buffer), size: Number(descriptor.size), device: new WeakRef(this) };
    entries.add(entry);
    entryOf.set(buffer, entry);
    created++;
    return buffer;
  };
  const destroyBuffer = GPUBuffer.prototype.destroy;
  GPUBuffer.prototype.destroy = function () {
    const entry = entryOf.get(this);
    if (entry) forget(entry);
    return destroyBuffer.call(this);
  };
  const destroyDevice = GPUDevice.prototype.destroy;
  GPUDevice.prototype.destroy = function () {
    for (const entry of [...entries]) if (entry.device.deref() === this) forget(entry);
    return destroyDevice.call(this);
  };
  window.__gpuBuffers = () => {
    let bytes = 0;
    for (const entry of [...entries]) {
      if (entry.ref.deref() === undefined) {
        entries.delete(entry);
        collected++;
      } else {
        bytes += entry.size;
      }
    }
    return { count: entries.size, bytes, created, destroyed, collected };
  };
}

/** The page's live GPU buffers now (after garbage collection when the page has `gc`). */
export const liveBuffers = (page) =>
  page.evaluate(() => {
    if (window.gc) for (let i = 0; i < 3; i++) window.gc();
    return window.__gpuBuffers();
  });
