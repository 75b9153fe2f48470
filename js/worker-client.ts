// The page side of worker mode: a `Model` whose every call is a message to the fuselm worker
// (worker.ts). Generations stream chunk by chunk across the boundary; aborting sends an abort
// message, and the worker stops the generation at its next chunk boundary.
import type { Calibration, ChatMessage, GenerateResult, ModelInfo, PreparedFormat, ResponseFormat, SessionInfo } from "./wasm/fuselm.js";
import { calibrateWith, type CalibrateCallOptions } from "./calibration.js";
import { FuselmError } from "./errors.js";
import { Generation } from "./generation.js";
import { sessionBytes } from "./session.js";
import { chatCompletions, type Chat } from "./chat.js";
import { bufferBytes, bufferStream, type LoadModelOptions, type LoadProgress, type ModelSource } from "./load.js";
import type { GenerateCallOptions, Model, TokenizeOptions } from "./model-types.js";
import { fromWire, type Reply, type Request, type WireSource } from "./worker-protocol.js";

type Op = Request extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;
type DoneValue = (Reply & { event: "done" })["value"];

interface Pending {
  resolve(value: DoneValue): void;
  reject(error: FuselmError): void;
  onProgress?: (progress: LoadProgress) => void;
  onChunk?: (text: string, tokenIds: number[]) => void;
}

class WorkerClient {
  #next = 1;
  readonly #pending = new Map<number, Pending>();
  #dead: FuselmError | undefined;

  constructor(readonly worker: Worker) {
    worker.addEventListener("message", (event: MessageEvent<Reply>) => this.#dispatch(event.data));
    worker.addEventListener("error", (event: ErrorEvent) => {
      this.#fail(new FuselmError("gpu", `the fuselm worker failed: ${event.message || "it could not start (check the worker URL)"}`));
    });
    worker.addEventListener("messageerror", () => this.#fail(new FuselmError("gpu", "a message from the fuselm worker could not be read")));
  }

  call(
    op: Op,
    options: {
      transfer?: Transferable[];
      signal?: AbortSignal;
      onProgress?: Pending["onProgress"];
      onChunk?: Pending["onChunk"];
    } = {},
  ): Promise<DoneValue> {
    if (this.#dead) return Promise.reject(this.#dead);
    const id = this.#next++;
    const { signal } = options;
    return new Promise<DoneValue>((resolve, reject) => {
      const onAbort = () => this.worker.postMessage({ id, op: "abort" } satisfies Request);
      const settle = () => signal?.removeEventListener("abort", onAbort);
      this.#pending.set(id, {
        resolve: (v) => (settle(), resolve(v)),
        reject: (e) => (settle(), reject(e)),
        onProgress: options.onProgress,
        onChunk: options.onChunk,
      });
      this.worker.postMessage({ ...op, id } as Request, options.transfer ?? []);
      if (signal?.aborted) onAbort();
      else signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  terminate(): void {
    this.worker.terminate();
    this.#fail(new FuselmError("invalid-argument", "this model was disposed"));
  }

  #dispatch(reply: Reply): void {
    const p = this.#pending.get(reply.id);
    if (p === undefined) return;
    switch (reply.event) {
      case "progress": {
        const { cacheError, ...rest } = reply.progress;
        p.onProgress?.(cacheError ? { ...rest, cacheError: fromWire(cacheError) } : rest);
        break;
      }
      case "chunk":
        p.onChunk?.(reply.text, reply.tokenIds);
        break;
      case "done":
        this.#pending.delete(reply.id);
        p.resolve(reply.value);
        break;
      case "error":
        this.#pending.delete(reply.id);
        p.reject(fromWire(reply.error));
        break;
    }
  }

  #fail(error: FuselmError): void {
    this.#dead ??= error;
    for (const p of this.#pending.values()) p.reject(error);
    this.#pending.clear();
  }
}

function toWireSource(source: ModelSource): { source: WireSource; transfer: Transferable[] } {
  const streamed = (stream: ReadableStream<Uint8Array>, totalBytes: number | undefined) => ({
    source: { stream, totalBytes },
    transfer: [stream as unknown as Transferable],
  });
  if (typeof source === "string" || source instanceof URL) {
    const base = typeof location === "undefined" ? undefined : location.href;
    try {
      return { source: { url: new URL(String(source), base).href }, transfer: [] };
    } catch (e) {
      throw new FuselmError("invalid-argument", `not a model URL: ${String(source)}`, { cause: e });
    }
  }
  if (source instanceof Request) {
    if (source.method !== "GET") throw new FuselmError("invalid-argument", "worker mode fetches models with GET only");
    return { source: { url: source.url }, transfer: [] };
  }
  if (source instanceof Response) {
    if (!source.ok) throw new FuselmError("network", `could not download ${source.url || "the model"}: HTTP ${source.status}`);
    const length = source.headers.get("content-length");
    const body = source.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
    return streamed(body, length !== null && /^\d+$/.test(length) ? Number(length) : undefined);
  }
  if (source instanceof Blob) return { source: { blob: source }, transfer: [] };
  if (source instanceof ReadableStream) return streamed(source, undefined);
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const bytes = bufferBytes(source);
    return streamed(bufferStream(bytes, true), bytes.length);
  }
  throw new FuselmError("invalid-argument", "a model source is a URL, Request, Response, ArrayBuffer, typed array, Blob/File or ReadableStream");
}

class WorkerModel implements Model {
  readonly chat: Chat;
  readonly #client: WorkerClient;

  #info: ModelInfo;

  constructor(client: WorkerClient, info: ModelInfo) {
    this.#info = info;
    this.#client = client;
    this.chat = {
      completions: chatCompletions(
        (messages, options, signal) => this.#start({ op: "chat", messages, options }, signal),
        () => `fuselm/${this.info.architecture}`,
      ),
    };
  }

  generate(prompt: string, options: GenerateCallOptions = {}): Generation {
    const { signal, ...settings } = options;
    return this.#start({ op: "generate", prompt, options: settings }, signal);
  }

  #start(op: Op & { op: "generate" | "chat" }, signal: AbortSignal | undefined): Generation {
    return new Generation(
      (sink, stop) =>
        this.#client.call(op, {
          signal: stop,
          onChunk: (text, ids) => {
            sink(text, ids[0]);
            for (const id of ids.slice(1)) sink("", id);
          },
        }) as Promise<GenerateResult>,
      signal,
    );
  }

  get info(): ModelInfo {
    return this.#info;
  }

  calibrate(options: CalibrateCallOptions = {}): Promise<Calibration> {
    return calibrateWith(
      {
        key: async () => (await this.#client.call({ op: "calibrationKey" })) as string,
        measure: async (settings) => {
          const done = (await this.#client.call({ op: "calibrate", options: settings })) as { calibration: Calibration; info: ModelInfo };
          this.#info = done.info;
          return done.calibration;
        },
        apply: (c) => this.useCalibration(c),
      },
      options,
    );
  }

  async useCalibration(calibration: Calibration): Promise<void> {
    this.#info = (await this.#client.call({ op: "useCalibration", calibration })) as ModelInfo;
  }

  async tokenize(text: string, options: TokenizeOptions = {}): Promise<number[]> {
    return (await this.#client.call({
      op: "tokenize",
      text,
      addSpecial: options.addSpecial ?? false,
      parseSpecial: options.parseSpecial ?? false,
    })) as number[];
  }

  async prepareResponseFormat(format: ResponseFormat): Promise<PreparedFormat> {
    return (await this.#client.call({ op: "prepareResponseFormat", format })) as PreparedFormat;
  }

  async saveSession(): Promise<Uint8Array> {
    return (await this.#client.call({ op: "saveSession" })) as Uint8Array;
  }

  async loadSession(bytes: Uint8Array | ArrayBuffer): Promise<SessionInfo> {
    // A copy crosses to the worker (the caller keeps its bytes, e.g. to store them again).
    const copy = sessionBytes(bytes).slice();
    return (await this.#client.call({ op: "loadSession", bytes: copy }, { transfer: [copy.buffer] })) as SessionInfo;
  }

  async detokenize(ids: ArrayLike<number>): Promise<string> {
    return (await this.#client.call({ op: "detokenize", ids: Array.from(ids) })) as string;
  }

  async dispose(): Promise<void> {
    await this.#client.call({ op: "dispose" }).catch(() => {});
    this.#client.terminate();
  }
}

/** `loadModel` with `{ worker }`: starts a module worker and loads the model in it. */
export async function loadInWorker(source: ModelSource, options: LoadModelOptions): Promise<Model> {
  if (typeof Worker === "undefined") throw new FuselmError("invalid-argument", "worker mode needs Web Workers (a browser)");
  const { onProgress, signal, worker: where, ...rest } = options;
  // The literal `new Worker(new URL("./worker.js", import.meta.url), …)` is what bundlers
  // (Vite, webpack 5) recognise to ship the worker script along.
  const worker =
    typeof where === "object"
      ? new Worker(where.url, { type: "module", name: "fuselm" })
      : new Worker(new URL("./worker.js", import.meta.url), { type: "module", name: "fuselm" });
  const client = new WorkerClient(worker);
  try {
    const wire = toWireSource(source);
    const info = (await client.call({ op: "load", source: wire.source, options: rest }, { transfer: wire.transfer, signal, onProgress })) as ModelInfo;
    return new WorkerModel(client, info);
  } catch (e) {
    client.terminate();
    throw e;
  }
}

export type { ChatMessage };
