// Helpers for tests/site/cache.test.mjs around /dist/cache.js. They know the cache's layout
// (documented at the top of js/cache.ts) so that the test can damage entries on purpose.
import { openModelBody, deleteCachedModel, CacheCorruptError, crc32 } from "/dist/cache.js";
import { FuselmError } from "/dist/errors.js";

const CACHE_NAME = "fuselm-models-v1";
const OPFS_DIR = "fuselm-models";
const abs = (url) => new URL(url, location.href).href;
const metaKey = (url) => `https://fuselm-meta.invalid/v1?url=${encodeURIComponent(abs(url))}`;

const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
const sha256 = async (bytes) => hex(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)));

async function opfsNames(url) {
  const hash = await sha256(new TextEncoder().encode(abs(url)));
  const root = await navigator.storage.getDirectory();
  const dir = await root.getDirectoryHandle(OPFS_DIR, { create: true });
  return { dir, body: `${hash}.gguf`, meta: `${hash}.json` };
}

const describeError = (e) => ({
  name: e?.name,
  kind: e instanceof FuselmError ? e.kind : undefined,
  corrupt: e instanceof CacheCorruptError,
  message: String(e?.message ?? e),
});

/** Opens and reads a model body. `abortAfter`: abort the signal once that many bytes arrived.
 * `detach`: transfer each chunk's buffer away after reading it (as a loader posting chunks to a
 * worker would). `invalidateOnError`: call body.invalidate() when the stream errors, as the
 * loader does. Returns what was read and how it ended. */
async function read(url, mode, { abortAfter, detach = false, invalidateOnError = false } = {}) {
  const controller = new AbortController();
  let body;
  try {
    body = await openModelBody(new Request(url), mode, controller.signal);
  } catch (e) {
    return { opened: false, error: describeError(e) };
  }
  const parts = [];
  let length = 0;
  let chunks = 0;
  let error;
  const reader = body.stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks++;
      length += value.length;
      parts.push(value.slice());
      if (detach) structuredClone(value.buffer, { transfer: [value.buffer] });
      if (abortAfter !== undefined && length >= abortAfter) controller.abort();
    }
  } catch (e) {
    error = describeError(e);
    if (invalidateOnError) await body.invalidate();
  }
  const all = new Uint8Array(length);
  let at = 0;
  for (const p of parts) { all.set(p, at); at += p.length; }
  return {
    opened: true, fromCache: body.fromCache, totalBytes: body.totalBytes, length, chunks,
    sha256: await sha256(all), error,
  };
}

/** Which parts of the entry for `url` exist in the store. */
async function entry(url, mode) {
  if (mode === "cache-api") {
    const cache = await caches.open(CACHE_NAME);
    const body = await cache.match(abs(url));
    const meta = await cache.match(metaKey(url));
    return {
      body: body ? (await body.arrayBuffer()).byteLength : null,
      meta: meta ? await meta.json() : null,
    };
  }
  const { dir, body, meta } = await opfsNames(url);
  const size = async (name) => { try { return (await (await dir.getFileHandle(name)).getFile()).size; } catch { return null; } };
  const text = async (name) => { try { return JSON.parse(await (await (await dir.getFileHandle(name)).getFile()).text()); } catch { return null; } };
  return { body: await size(body), meta: await text(meta) };
}

/** Flips one byte of the stored body in place (same length, metadata untouched). */
async function corrupt(url, mode, offset) {
  if (mode === "cache-api") {
    const cache = await caches.open(CACHE_NAME);
    const bytes = new Uint8Array(await (await cache.match(abs(url))).arrayBuffer());
    bytes[offset] ^= 0x40;
    await cache.put(abs(url), new Response(bytes));
    return;
  }
  const { dir, body } = await opfsNames(url);
  const handle = await dir.getFileHandle(body);
  const old = new Uint8Array(await (await handle.getFile()).slice(offset, offset + 1).arrayBuffer());
  const w = await handle.createWritable({ keepExistingData: true });
  await w.write({ type: "write", position: offset, data: new Uint8Array([old[0] ^ 0x40]) });
  await w.close();
}

/** Stores `size` bytes of garbage as the body for `url` with no metadata: an incomplete entry. */
async function writeIncomplete(url, mode, size) {
  const garbage = new Uint8Array(size).fill(0xab);
  if (mode === "cache-api") {
    const cache = await caches.open(CACHE_NAME);
    await cache.delete(metaKey(url));
    await cache.put(abs(url), new Response(garbage));
    return;
  }
  const { dir, body, meta } = await opfsNames(url);
  try { await dir.removeEntry(meta); } catch {}
  const w = await (await dir.getFileHandle(body, { create: true })).createWritable();
  await w.write(garbage);
  await w.close();
}

/** CRC-32 throughput over the bytes of `url` (fetched once): the best of `runs`, in MB/s (10^6). */
async function checksumThroughput(url, runs = 3) {
  const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
  const results = [];
  let crc = 0;
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    // In 64 KiB pieces, as the stream delivers them.
    crc = 0;
    for (let i = 0; i < bytes.length; i += 65536) crc = crc32(bytes.subarray(i, i + 65536), crc);
    results.push(performance.now() - t0);
  }
  const best = Math.min(...results);
  return { bytes: bytes.length, crc, ms: results, mbPerSecond: bytes.length / 1e6 / (best / 1e3) };
}

/** Times one read of `url` through openModelBody (network + store, or cache + verify). */
async function timedRead(url, mode) {
  const t0 = performance.now();
  const body = await openModelBody(new Request(url), mode);
  const reader = body.stream.getReader();
  let length = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    length += value.length;
  }
  return { fromCache: body.fromCache, length, ms: performance.now() - t0 };
}

/** Reads `url` with openModelBody in a module worker (worker.js). */
function readInWorker(url, mode) {
  const worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
  return new Promise((resolve, reject) => {
    worker.onmessage = ({ data }) => resolve(data);
    worker.onerror = (e) => reject(new Error(e.message));
    worker.postMessage({ url, mode });
  }).finally(() => worker.terminate());
}

async function clearAll() {
  await caches.delete(CACHE_NAME);
  const root = await navigator.storage.getDirectory();
  try { await root.removeEntry(OPFS_DIR, { recursive: true }); } catch {}
}

window.cacheTest = {
  read, readInWorker, entry, corrupt, writeIncomplete, checksumThroughput, timedRead, clearAll, deleteCachedModel,
  crc32: (text) => crc32(new TextEncoder().encode(text)),
};
document.body.dataset.state = "ready";
