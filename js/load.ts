// Loading a GGUF model from any source, streamed: bytes go from the network (or cache, file,
// stream) into the wasm loader chunk by chunk, and each tensor is uploaded to the GPU as soon as
// its bytes are in. The file is never held whole in JS or wasm memory. The GGUF header is checked
// against the adapter first, so a model that cannot fit is refused before its weights download.
import * as wasm from "./wasm/fuselm.js";
import type { LoadOptions, LoadStatus, MemoryUse } from "./wasm/fuselm.js";
import { init } from "./init.js";
import { FuselmError, toFuselmError } from "./errors.js";
import { CacheCorruptError, openModelBody, type CacheMode } from "./cache.js";

/** Where a model comes from: a URL to fetch (string, `URL` or `Request`), a fetched `Response`,
 * its bytes, a `Blob`/`File` (e.g. from an `<input type="file">`), or a stream of bytes. */
export type ModelSource =
  | string
  | URL
  | Request
  | Response
  | ArrayBuffer
  | ArrayBufferView
  | Blob
  | ReadableStream<Uint8Array>;

/** The stages of a load. Bytes are streamed: they arrive ("download" until the GGUF header is
 * complete), the header is checked against the adapter ("parse", once), then each arriving chunk
 * goes straight to the GPU ("upload"), and finally the kernels are compiled ("compile", once). */
export type LoadPhase = "download" | "parse" | "upload" | "compile";

export interface LoadProgress {
  phase: LoadPhase;
  /** Bytes of the file received so far. */
  loadedBytes: number;
  /** The file's size when known (content-length, cache entry, Blob size, or the GGUF header). */
  totalBytes: number | undefined;
  /** The bytes come from the cache (`cache` option) rather than the network. */
  fromCache: boolean;
  /** The GPU memory the model will hold once loaded, estimated from the GGUF header (from the
   * "parse" phase on; see `estimateMemory`). */
  memory?: MemoryUse;
  /** With a `cache` option: why the download is not being kept (kind "cache": the storage
   * quota ran out, or the store is not available here), in every report once it is known. The
   * load goes on; the next load of the URL downloads it again. */
  cacheError?: FuselmError;
}

export interface LoadModelOptions extends LoadOptions {
  /** Called as the load advances (see `LoadPhase`); never called after the promise settles. */
  onProgress?: (progress: LoadProgress) => void;
  /** Keep the downloaded file for later loads of the same URL: in Cache Storage ("cache-api"),
   * in the origin private file system ("opfs"), or not at all ("none", the default). Cached
   * bytes are verified (length and CRC-32); a corrupt entry is dropped and downloaded again.
   * Applies to URL and `Request` sources. */
  cache?: CacheMode;
  /** Aborts the load: the promise rejects with kind "aborted", the download stops and nothing
   * stays on the GPU. */
  signal?: AbortSignal;
  /** Run the model in a module Web Worker: every GPU call and the load happen off the main
   * thread, with the same API (streaming and abort cross the worker boundary). `true` starts
   * the worker script shipped next to this module (`dist/worker.js`); `{ url }` names another
   * copy of it (e.g. where a bundler put it). */
  worker?: boolean | { url: string | URL };
  /** Bytes of GPU memory that the models of this page may hold together (this one included;
   * in worker mode, the models of its worker). A load whose estimate (`estimateMemory`) passes
   * what the budget leaves after the models already loaded is refused from the GGUF header,
   * before the weights download, with kind "limit-exceeded", `limit: "memoryBudget"`, and
   * `needed` / `available` in bytes (the message gives the parts). Default: no budget (only the
   * adapter's limits apply: WebGPU does not tell a device's memory). */
  memoryBudget?: number;
}

/** What loading a model will hold on the GPU, from its GGUF header (`estimateMemory`). */
export interface MemoryEstimate extends MemoryUse {
  /** The file's size as its header describes it. */
  fileBytes: number | undefined;
  /** GPU bytes the models already loaded in this page hold (`memoryInUse()`). */
  inUse: number;
}

/** Options of `estimateMemory`: the sizes the load would use (as `loadModel`'s). */
export interface EstimateMemoryOptions extends Pick<LoadOptions, "nCtx" | "maxBatch" | "kvF16"> {
  /** Stops reading: the promise rejects with kind "aborted". */
  signal?: AbortSignal;
}

/** Bytes handed to the wasm loader per call when the source is one big buffer. */
const SLICE_BYTES = 4 << 20;

/** The bytes of a buffer source, without copying. */
export function bufferBytes(source: ArrayBuffer | ArrayBufferView): Uint8Array {
  return source instanceof ArrayBuffer ? new Uint8Array(source) : new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
}

/** A buffer as a stream of `SLICE_BYTES` slices: views into it, or copies with `copy` (for
 * slices that cross to a worker, where a view would clone its whole underlying buffer). */
export function bufferStream(bytes: Uint8Array, copy: boolean): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= bytes.length) {
        controller.close();
        return;
      }
      const end = at + SLICE_BYTES;
      controller.enqueue(copy ? bytes.slice(at, end) : bytes.subarray(at, end));
      at = end;
    },
  });
}

interface Body {
  stream: ReadableStream<Uint8Array>;
  totalBytes: number | undefined;
  fromCache: boolean;
  cacheError?: () => FuselmError | undefined;
  invalidate(): Promise<void>;
}

const noInvalidate = async () => {};

function abortedError(signal: AbortSignal): FuselmError {
  const reason: unknown = signal.reason;
  const why = reason instanceof Error ? reason.message : reason === undefined ? "" : String(reason);
  return new FuselmError("aborted", `loading was aborted${why ? `: ${why}` : ""}`, { cause: reason });
}

async function openBody(source: ModelSource, cache: CacheMode, signal: AbortSignal | undefined): Promise<Body> {
  if (typeof source === "string" || source instanceof URL || (typeof Request !== "undefined" && source instanceof Request)) {
    let request: Request;
    try {
      const base = typeof location === "undefined" ? undefined : location.href;
      request = source instanceof Request ? source : new Request(new URL(String(source), base));
    } catch (e) {
      throw new FuselmError("invalid-argument", `not a model URL: ${String(source)}`, { cause: e });
    }
    return await openModelBody(request, cache, signal);
  }
  if (typeof Response !== "undefined" && source instanceof Response) {
    if (!source.ok) {
      throw new FuselmError("network", `could not download ${source.url || "the model"}: HTTP ${source.status} ${source.statusText}`.trimEnd());
    }
    if (source.bodyUsed) throw new FuselmError("invalid-argument", "this Response's body was already read");
    const length = source.headers.get("content-length");
    return {
      stream: source.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() }),
      totalBytes: length !== null && /^\d+$/.test(length) ? Number(length) : undefined,
      fromCache: false,
      invalidate: noInvalidate,
    };
  }
  if (typeof Blob !== "undefined" && source instanceof Blob) {
    return { stream: source.stream(), totalBytes: source.size, fromCache: false, invalidate: noInvalidate };
  }
  if (typeof ReadableStream !== "undefined" && source instanceof ReadableStream) {
    return { stream: source, totalBytes: undefined, fromCache: false, invalidate: noInvalidate };
  }
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const bytes = bufferBytes(source);
    return { stream: bufferStream(bytes, false), totalBytes: bytes.length, fromCache: false, invalidate: noInvalidate };
  }
  throw new FuselmError(
    "invalid-argument",
    "a model source is a URL, Request, Response, ArrayBuffer, typed array, Blob/File or ReadableStream",
  );
}

/** Streams `body` into a new wasm loader and builds the model. */
async function loadBody(body: Body, options: LoadModelOptions): Promise<wasm.Model> {
  const { onProgress, signal } = options;
  const load: LoadOptions = { nCtx: options.nCtx, maxBatch: options.maxBatch, kvF16: options.kvF16, strategy: options.strategy };
  const loader = await wasm.createModelLoader(load, body.totalBytes, options.memoryBudget);
  const reader = body.stream.getReader();
  let totalBytes = body.totalBytes;
  let memory: MemoryUse | undefined;
  const report = (phase: LoadPhase, loadedBytes: number) => {
    const cacheError = body.cacheError?.();
    onProgress?.({ phase, loadedBytes, totalBytes, fromCache: body.fromCache, ...(memory ? { memory } : {}), ...(cacheError ? { cacheError } : {}) });
  };
  let finished = false;
  try {
    let headerReady = false;
    let loaded = 0;
    report("download", 0);
    for (;;) {
      if (signal?.aborted) throw abortedError(signal);
      const { done, value } = await reader.read();
      if (done) break;
      if (signal?.aborted) throw abortedError(signal);
      const status: LoadStatus = loader.push(value);
      loaded = status.bytesReceived;
      if (status.headerReady && !headerReady) {
        headerReady = true;
        totalBytes ??= status.fileBytes;
        memory = status.memory;
        report("parse", loaded);
      }
      report(headerReady ? "upload" : "download", loaded);
    }
    report("compile", loaded);
    const model = await loader.finish();
    finished = true;
    if (signal?.aborted) {
      model.free();
      throw abortedError(signal);
    }
    return model;
  } catch (e) {
    // Stop the download; the stream's own error (corrupt cache, network) is already in `e`.
    await reader.cancel().catch(() => {});
    throw e;
  } finally {
    reader.releaseLock();
    if (!finished) loader.free();
  }
}

/** Loads a model from `source`, retrying once from the network when cached bytes are corrupt. */
export async function loadRaw(source: ModelSource, options: LoadModelOptions = {}): Promise<wasm.Model> {
  const { signal } = options;
  const cache = options.cache ?? "none";
  if (!["none", "cache-api", "opfs"].includes(cache)) {
    throw new FuselmError("invalid-argument", `cache must be "cache-api", "opfs" or "none"; got ${JSON.stringify(cache)}`);
  }
  try {
    await init();
    if (signal?.aborted) throw abortedError(signal);
    const body = await openBody(source, cache, signal);
    try {
      return await loadBody(body, options);
    } catch (e) {
      const corrupt = e instanceof CacheCorruptError || toFuselmError(e).kind === "invalid-model";
      // Bytes that do not parse are never kept: a download found invalid only at its end is
      // already a complete cache entry, and would fail every later load.
      if (corrupt) await body.invalidate();
      if (!body.fromCache || !corrupt || signal?.aborted) throw e;
      // The cached copy is damaged: download again.
      return await loadBody(await openBody(source, cache, signal), options);
    }
  } catch (e) {
    if (signal?.aborted) throw abortedError(signal);
    throw toFuselmError(e);
  }
}

/** `memoryInUse()`. */
export async function memoryInUseRaw(): Promise<number> {
  try {
    await init();
    return wasm.memoryInUse();
  } catch (e) {
    throw toFuselmError(e);
  }
}

/** `estimateMemory`: reads `source` up to the end of its GGUF header, then stops the download. */
export async function estimateRaw(source: ModelSource, options: EstimateMemoryOptions = {}): Promise<MemoryEstimate> {
  const { signal } = options;
  try {
    await init();
    const body = await openBody(source, "none", signal);
    const load: LoadOptions = { nCtx: options.nCtx, maxBatch: options.maxBatch, kvF16: options.kvF16 };
    const loader = await wasm.createModelLoader(load, body.totalBytes, undefined);
    const reader = body.stream.getReader();
    let status: LoadStatus | undefined;
    try {
      while (!status?.memory) {
        if (signal?.aborted) throw abortedError(signal);
        const { done, value } = await reader.read();
        if (done) throw new FuselmError("invalid-model", "the file ended before its GGUF header did");
        status = loader.push(value);
      }
    } finally {
      await reader.cancel().catch(() => {});
      reader.releaseLock();
      loader.free(); // before memoryInUse: a load under way counts its estimate there
    }
    return { ...status.memory, fileBytes: status.fileBytes, inUse: wasm.memoryInUse() };
  } catch (e) {
    if (signal?.aborted) throw abortedError(signal);
    throw toFuselmError(e);
  }
}

/** All bytes of `source` in one buffer (for `bench`, which needs the whole file). */
export async function readAll(source: ModelSource, signal?: AbortSignal): Promise<Uint8Array> {
  try {
    const body = await openBody(source, "none", signal);
    const parts: Uint8Array[] = [];
    let length = 0;
    const reader = body.stream.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
      length += value.length;
    }
    if (parts.length === 1 && parts[0] !== undefined) return parts[0];
    const out = new Uint8Array(length);
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  } catch (e) {
    throw toFuselmError(e);
  }
}
