// The model cache behind `loadModel(url, { cache })`: a model's bytes are kept in the browser's
// Cache Storage ("cache-api") or in the origin private file system ("opfs") after the first
// download, and read from there — verified — on later loads.
//
// Layout (version 1):
//   cache-api  `caches.open("fuselm-models-v1")`:
//                body  keyed by the model URL (a plain `Response` with the bytes);
//                meta  keyed by `https://fuselm-meta.invalid/v1?url=<encoded model URL>`, JSON
//                      `{ version, url, length, checksum, complete: true }`. Not `URL + "#meta"`:
//                      Cache Storage compares URLs without their fragment, so that key would be
//                      the body's own and each put would replace the other. `.invalid` is a
//                      reserved TLD, so the key can never be a real resource.
//   opfs       `navigator.storage.getDirectory()` → directory "fuselm-models":
//                `<sha-256 of the URL, hex>.gguf`  the bytes (written with createWritable(),
//                                                   which only replaces the file on close());
//                `<same>.json`                      `{ version, url, length, checksum }`.
// In both stores the metadata is written last, only after the body was stored completely, and
// removed first when an entry is replaced or invalidated. An entry without metadata (a download
// that was interrupted, aborted or failed to store) is incomplete: it is ignored and overwritten.
//
// Checksum: CRC-32 (IEEE, the zlib one) computed slicing-by-8 in JS. It detects corruption (a
// truncated or damaged body, a store that returns other bytes), it is not a security measure:
// anyone who can write the origin's storage can write matching metadata too.
//
// Entries are never revalidated with the server: a URL is taken to name immutable bytes (use
// versioned URLs, or `deleteCachedModel(url)` to force a new download).
import { FuselmError } from "./errors.js";

/** Where `loadModel` keeps downloaded models: Cache Storage, the origin private file system, or
 * nowhere. */
export type CacheMode = "cache-api" | "opfs" | "none";

export interface ModelBody {
  /** The model's bytes. From the cache they are verified while read: if they do not match what
   * was stored (length + checksum), the stream errors with a `CacheCorruptError` at its end
   * (after the last chunk was delivered). From the network, errors are `FuselmError`s of kind
   * "network" or "aborted". */
  stream: ReadableStream<Uint8Array>;
  /** The size in bytes, when known (from the cache, or a content-length without a content-encoding). */
  totalBytes: number | undefined;
  fromCache: boolean;
  /** Why the bytes are not being kept in the chosen cache, once that is known: the store is
   * unavailable here, or writing to it failed (e.g. the storage quota ran out). The load goes
   * on from the network either way; undefined while caching works (and with mode "none"). */
  cacheError?: () => FuselmError | undefined;
  /** Drops this URL's cache entry (the loader calls it when cached bytes fail to parse). Never
   * rejects; a no-op with mode "none" or where the store is unavailable. */
  invalidate(): Promise<void>;
}

/** The bytes read from the cache are not the bytes that were stored. */
export class CacheCorruptError extends Error {
  override readonly name = "CacheCorruptError";
}

// ---------------------------------------------------------------------------------------------
// CRC-32 (polynomial 0xEDB88320), slicing-by-8: eight table lookups per 8 bytes.

const CRC_TABLES: Int32Array = (() => {
  const t = new Int32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n];
    for (let s = 1; s < 8; s++) {
      c = t[c & 0xff] ^ (c >>> 8);
      t[s * 256 + n] = c;
    }
  }
  return t;
})();

/** Continues a CRC-32 over `bytes`. Start with 0; the result is the unsigned CRC of everything
 * passed so far (`crc32(b, crc32(a))` equals the CRC of `a` followed by `b`). */
export function crc32(bytes: Uint8Array, crc = 0): number {
  const t = CRC_TABLES;
  let c = ~crc;
  const n = bytes.length;
  const end8 = n - (n & 7);
  let i = 0;
  for (; i < end8; i += 8) {
    const lo = c ^ (bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24));
    c =
      t[1792 + (lo & 0xff)] ^
      t[1536 + ((lo >>> 8) & 0xff)] ^
      t[1280 + ((lo >>> 16) & 0xff)] ^
      t[1024 + (lo >>> 24)] ^
      t[768 + bytes[i + 4]] ^
      t[512 + bytes[i + 5]] ^
      t[256 + bytes[i + 6]] ^
      t[bytes[i + 7]];
  }
  for (; i < n; i++) c = t[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

// ---------------------------------------------------------------------------------------------
// The two stores behind one small interface.

interface EntryMeta {
  version: 1;
  url: string;
  length: number;
  checksum: number;
}

interface CachedEntry {
  meta: EntryMeta;
  body: ReadableStream<Uint8Array>;
}

/** A body being written. `write` resolves when the store has taken the chunk (its queue is the
 * backpressure), `commit` stores the metadata after the body is complete. */
interface EntrySink {
  ready(): Promise<void>;
  write(chunk: Uint8Array): Promise<void>;
  commit(meta: EntryMeta): Promise<void>;
  abort(reason: unknown): Promise<void>;
}

interface Store {
  /** The complete entry for `url`, or null (missing, incomplete, unreadable). */
  lookup(url: string): Promise<CachedEntry | null>;
  /** Removes any metadata for `url` (so the entry is incomplete from now on) and starts a new body. */
  begin(url: string): Promise<EntrySink>;
  remove(url: string): Promise<void>;
}

const CACHE_NAME = "fuselm-models-v1";
const OPFS_DIR = "fuselm-models";
/** How much a cache write may lag behind the consumer before the download waits for it. */
const SINK_QUEUE_BYTES = 4 << 20;

function isMeta(v: unknown, url: string): v is EntryMeta {
  if (typeof v !== "object" || v === null) return false;
  const m = v as Record<string, unknown>;
  return (
    m.version === 1 &&
    m.url === url &&
    Number.isSafeInteger(m.length) &&
    (m.length as number) >= 0 &&
    Number.isInteger(m.checksum) &&
    (m.checksum as number) >= 0 &&
    (m.checksum as number) <= 0xffffffff
  );
}

const metaKey = (url: string) => `https://fuselm-meta.invalid/v1?url=${encodeURIComponent(url)}`;

class CacheApiStore implements Store {
  constructor(private readonly cache: Cache) {}

  static async open(): Promise<CacheApiStore | null> {
    // Cache Storage exists only in secure contexts (https, localhost), and not in Node.
    if (typeof caches === "undefined" || globalThis.isSecureContext === false) return null;
    try {
      return new CacheApiStore(await caches.open(CACHE_NAME));
    } catch {
      return null; // e.g. storage disabled by the user's settings
    }
  }

  async lookup(url: string): Promise<CachedEntry | null> {
    const metaResponse = await this.cache.match(metaKey(url));
    if (!metaResponse) return null;
    const meta: unknown = await metaResponse.json();
    if (!isMeta(meta, url)) return null;
    const body = await this.cache.match(url);
    if (!body || !body.body) return null;
    return { meta, body: body.body };
  }

  async begin(url: string): Promise<EntrySink> {
    await this.cache.delete(metaKey(url));
    // cache.put() reads this stream as it is written and stores nothing if it errors.
    const pipe = new TransformStream<Uint8Array, Uint8Array>(
      undefined,
      new ByteLengthQueuingStrategy({ highWaterMark: SINK_QUEUE_BYTES }),
    );
    const put = this.cache.put(
      url,
      new Response(pipe.readable, { headers: { "content-type": "application/octet-stream" } }),
    );
    put.catch(() => {}); // observed in commit(); an abort rejects it on purpose
    const writer = pipe.writable.getWriter();
    return {
      ready: () => writer.ready,
      write: (chunk) => writer.write(chunk),
      commit: async (meta) => {
        await writer.close();
        await put;
        await this.cache.put(
          metaKey(url),
          new Response(JSON.stringify({ ...meta, complete: true }), { headers: { "content-type": "application/json" } }),
        );
      },
      abort: async (reason) => {
        await writer.abort(reason).catch(() => {});
        await put.catch(() => {});
      },
    };
  }

  async remove(url: string): Promise<void> {
    await this.cache.delete(metaKey(url));
    await this.cache.delete(url);
  }
}

async function sha256Hex(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

const isNotFound = (e: unknown) => e instanceof DOMException && e.name === "NotFoundError";

class OpfsStore implements Store {
  constructor(private readonly dir: FileSystemDirectoryHandle) {}

  static async open(): Promise<OpfsStore | null> {
    // OPFS needs a secure context; createWritable() is missing in some browsers' windows (older
    // Safari): then there is no cache rather than a second code path.
    const storage = typeof navigator === "undefined" ? undefined : navigator.storage;
    if (
      globalThis.isSecureContext === false ||
      typeof storage?.getDirectory !== "function" ||
      typeof FileSystemFileHandle === "undefined" ||
      typeof FileSystemFileHandle.prototype.createWritable !== "function" ||
      typeof crypto?.subtle?.digest !== "function"
    ) {
      return null;
    }
    try {
      const root = await storage.getDirectory();
      return new OpfsStore(await root.getDirectoryHandle(OPFS_DIR, { create: true }));
    } catch {
      return null; // e.g. a private window that has no OPFS
    }
  }

  private static async names(url: string) {
    const hash = await sha256Hex(url);
    return { body: `${hash}.gguf`, meta: `${hash}.json` };
  }

  async lookup(url: string): Promise<CachedEntry | null> {
    const names = await OpfsStore.names(url);
    let meta: unknown;
    let file: File;
    try {
      meta = JSON.parse(await (await (await this.dir.getFileHandle(names.meta)).getFile()).text());
      file = await (await this.dir.getFileHandle(names.body)).getFile();
    } catch (e) {
      if (isNotFound(e) || e instanceof SyntaxError) return null;
      throw e;
    }
    if (!isMeta(meta, url)) return null;
    // A size that differs is damage found without reading: not an entry (it is overwritten).
    if (file.size !== meta.length) return null;
    return { meta, body: file.stream() };
  }

  async begin(url: string): Promise<EntrySink> {
    const names = await OpfsStore.names(url);
    await this.removeFile(names.meta);
    const handle = await this.dir.getFileHandle(names.body, { create: true });
    // The new bytes go to a swap file; close() replaces the file, abort() discards them.
    const writable = await handle.createWritable({ keepExistingData: false });
    const writer = writable.getWriter();
    return {
      ready: () => writer.ready,
      write: (chunk) => writer.write(chunk),
      commit: async (meta) => {
        await writer.close();
        const sidecar = await (await this.dir.getFileHandle(names.meta, { create: true })).createWritable();
        await sidecar.write(JSON.stringify(meta));
        await sidecar.close();
      },
      abort: async (reason) => {
        await writer.abort(reason).catch(() => {});
      },
    };
  }

  private async removeFile(name: string) {
    try {
      await this.dir.removeEntry(name);
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }

  async remove(url: string): Promise<void> {
    const names = await OpfsStore.names(url);
    await this.removeFile(names.meta);
    await this.removeFile(names.body);
  }
}

async function openStore(mode: CacheMode): Promise<Store | null> {
  if (mode === "cache-api") return CacheApiStore.open();
  if (mode === "opfs") return OpfsStore.open();
  return null;
}

// ---------------------------------------------------------------------------------------------
// Streams.

const abortedError = (cause?: unknown) => new FuselmError("aborted", "the model download was aborted", { cause });

/** The error for a failed fetch or body read: "aborted" when `signal` caused it, else "network". */
function networkError(e: unknown, url: string, signal?: AbortSignal): FuselmError {
  if (e instanceof FuselmError) return e;
  if (signal?.aborted || (e instanceof DOMException && e.name === "AbortError")) return abortedError(e);
  const message = e instanceof Error ? e.message : String(e);
  return new FuselmError("network", `could not download ${url}: ${message}`, { cause: e });
}

/** Runs `action` once when `signal` aborts; returns the function that unregisters it. */
function onAbort(signal: AbortSignal | undefined, action: () => void): () => void {
  if (!signal) return () => {};
  signal.addEventListener("abort", action, { once: true });
  return () => signal.removeEventListener("abort", action);
}

/** The cached bytes, with their length and CRC checked against the metadata. */
function verifiedStream(entry: CachedEntry, url: string, signal?: AbortSignal): ReadableStream<Uint8Array> {
  const reader = entry.body.getReader();
  let length = 0;
  let crc = 0;
  let done = false;
  let detach = () => {};
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        detach = onAbort(signal, () => {
          if (done) return;
          done = true;
          controller.error(abortedError(signal?.reason));
          reader.cancel(signal?.reason).catch(() => {});
        });
      },
      async pull(controller) {
        let chunk: ReadableStreamReadResult<Uint8Array>;
        try {
          chunk = await reader.read();
        } catch (e) {
          if (done) return;
          done = true;
          detach();
          controller.error(new CacheCorruptError(`the cached copy of ${url} could not be read: ${String(e)}`, { cause: e }));
          return;
        }
        if (done) return;
        if (chunk.done) {
          done = true;
          detach();
          if (length !== entry.meta.length || crc !== entry.meta.checksum) {
            controller.error(
              new CacheCorruptError(
                `the cached copy of ${url} is corrupt: ${length} bytes with CRC-32 ${hex(crc)}, ` +
                  `stored ${entry.meta.length} bytes with CRC-32 ${hex(entry.meta.checksum)}`,
              ),
            );
          } else {
            controller.close();
          }
          return;
        }
        length += chunk.value.length;
        crc = crc32(chunk.value, crc);
        controller.enqueue(chunk.value);
      },
      cancel(reason) {
        done = true;
        detach();
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

const hex = (n: number) => `0x${n.toString(16).padStart(8, "0")}`;

/** The network body, written to `sink` as it is read.
 *
 * Backpressure instead of `ReadableStream.tee()`: tee() lets the faster branch run ahead and
 * buffers everything the slower one has not read, so a cache write slower than the consumer (or
 * the consumer slower than the cache) could hold a second copy of the model in memory. Here each
 * chunk is handed to the sink only once the sink's queue has room (Cache Storage: the pipe's
 * SINK_QUEUE_BYTES; OPFS: the file writable's own one-chunk queue), and read from the network
 * only when the consumer pulls (highWaterMark 0): at most ~4 MiB plus one chunk is buffered, and
 * a slow cache slows the download down to its pace rather than piling up bytes.
 * The sink gets a copy of each chunk, so the consumer may transfer or detach its chunks (e.g.
 * postMessage them to a worker) while the cache still holds queued ones.
 *
 * The metadata is written before the consumer sees the end of the stream: when a read returns
 * `done`, the entry is complete (or the cache write failed, which is never the consumer's error). */
function storingStream(
  body: ReadableStream<Uint8Array>,
  url: string,
  sinkPromise: Promise<EntrySink | null>,
  isInvalidated: () => boolean,
  cacheFailed: (e: unknown) => void,
  signal?: AbortSignal,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let sink: EntrySink | null = null;
  let sinkOpened = false;
  let length = 0;
  let crc = 0;
  let done = false;
  let detach = () => {};
  const dropSink = (reason: unknown) => {
    const s = sink;
    sink = null;
    if (s) s.abort(reason).catch(() => {});
  };
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        detach = onAbort(signal, () => {
          if (done) return;
          done = true;
          const error = abortedError(signal?.reason);
          dropSink(error);
          controller.error(error);
          reader.cancel(signal?.reason).catch(() => {});
        });
      },
      async pull(controller) {
        if (!sinkOpened) {
          sinkOpened = true;
          sink = await sinkPromise;
          if (done) {
            dropSink(new Error("cancelled"));
            return;
          }
        }
        let chunk: ReadableStreamReadResult<Uint8Array>;
        try {
          chunk = await reader.read();
        } catch (e) {
          if (done) return;
          done = true;
          detach();
          const error = networkError(e, url, signal);
          dropSink(error);
          controller.error(error);
          return;
        }
        if (done) return;
        if (chunk.done) {
          const s = sink;
          sink = null;
          if (s) {
            if (isInvalidated()) {
              await s.abort(new Error("invalidated")).catch(() => {});
            } else {
              try {
                await s.commit({ version: 1, url, length, checksum: crc });
              } catch (e) {
                cacheFailed(e);
                await s.abort(e).catch(() => {});
              }
            }
          }
          if (done) return; // aborted while the metadata was written
          done = true;
          detach();
          controller.close();
          return;
        }
        const bytes = chunk.value;
        length += bytes.length;
        crc = crc32(bytes, crc);
        if (sink) {
          const s = sink;
          try {
            await s.ready();
            if (sink === s) {
              s.write(bytes.slice()).catch((e: unknown) => {
                if (sink === s) cacheFailed(e);
                dropSink(e);
              });
            }
          } catch (e) {
            if (sink === s) cacheFailed(e);
            dropSink(e);
          }
        }
        if (done) return;
        controller.enqueue(bytes);
      },
      cancel(reason) {
        done = true;
        detach();
        dropSink(reason);
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

// ---------------------------------------------------------------------------------------------
// The API.

/** Opens the body of `request` (a URL's GET): from the cache when a complete, intact entry
 * exists, else from the network — and then, with `mode` other than "none", writes the download
 * to the cache while it is read, marking the entry complete (length and CRC-32) only after its
 * last byte was stored.
 *
 * Where the chosen store is unavailable — Cache Storage or OPFS missing (Node, an insecure
 * http:// page, older browsers without `createWritable()`) or refusing access (private windows,
 * storage disabled) — the body comes from the network and nothing is cached. A cache that
 * fails while writing (quota exceeded) likewise only stops caching. Either way the load does
 * not fail: `cacheError()` then returns a `FuselmError` of kind "cache" saying why. A cached
 * entry that cannot be read is ignored and downloaded again.
 *
 * Rejects (and the network stream errors) with `FuselmError` kind "network" for a failed
 * request, a non-2xx status (in the message) or a broken connection, and kind "aborted" when
 * `signal` aborts. Bytes from the cache are verified as they are read (see `ModelBody.stream`). */
export async function openModelBody(request: Request, mode: CacheMode, signal?: AbortSignal): Promise<ModelBody> {
  const url = request.url;
  if (signal?.aborted) throw abortedError(signal.reason);
  // Only a GET names the bytes at a URL (Cache Storage refuses to store anything else).
  const store = mode === "none" || request.method !== "GET" ? null : await openStore(mode);
  let cacheError: FuselmError | undefined;
  const cacheFailed = (e: unknown) => {
    if (cacheError || signal?.aborted) return;
    const why = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    cacheError = new FuselmError(
      "cache",
      `${url} is not kept in the cache ("${mode}"): ${why}. The model loads from the network; the next load downloads it again`,
      { cause: e },
    );
  };
  if (mode !== "none" && request.method === "GET" && !store) {
    cacheFailed(new Error(mode === "opfs" ? "the origin private file system is not available here" : "Cache Storage is not available here"));
  }
  let invalidated = false;
  const invalidate = async () => {
    invalidated = true;
    if (store) await store.remove(url).catch(() => {});
  };

  if (store) {
    const entry = await store.lookup(url).catch(() => null);
    if (signal?.aborted) {
      await entry?.body.cancel().catch(() => {});
      throw abortedError(signal.reason);
    }
    if (entry) {
      return { stream: verifiedStream(entry, url, signal), totalBytes: entry.meta.length, fromCache: true, invalidate };
    }
  }

  let response: Response;
  try {
    response = await fetch(request, { signal });
  } catch (e) {
    throw networkError(e, url, signal);
  }
  if (!response.ok) {
    await response.body?.cancel().catch(() => {});
    throw new FuselmError(
      "network",
      `could not download ${url}: HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ""}`,
    );
  }
  const body = response.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
  const encoding = response.headers.get("content-encoding");
  const contentLength = response.headers.get("content-length");
  const totalBytes =
    contentLength !== null && /^\d+$/.test(contentLength) && (!encoding || encoding === "identity")
      ? Number(contentLength)
      : undefined;

  // The cache write starts now (its old metadata is removed first); the stream waits for it on
  // its first pull. A sink that cannot start means no caching, not an error.
  const sink =
    store && !invalidated
      ? store.begin(url).catch((e: unknown) => {
          cacheFailed(e);
          return null;
        })
      : Promise.resolve(null);
  return {
    stream: storingStream(body, url, sink, () => invalidated, cacheFailed, signal),
    totalBytes,
    fromCache: false,
    cacheError: () => cacheError,
    invalidate,
  };
}

/** Removes the cached copy of `url` (resolved against the page's address) from the given store,
 * or from both when `mode` is omitted. Resolves also where there is no such entry or no store. */
export async function deleteCachedModel(url: string, mode?: CacheMode): Promise<void> {
  const base = typeof location === "undefined" ? undefined : location.href;
  let resolved: string;
  try {
    resolved = new URL(url, base).href;
  } catch (e) {
    throw new FuselmError("invalid-argument", `not a URL: ${url}`, { cause: e });
  }
  const modes: CacheMode[] = mode === undefined ? ["cache-api", "opfs"] : [mode];
  for (const m of modes) {
    const store = await openStore(m);
    if (store) await store.remove(resolved);
  }
}
