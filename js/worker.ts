// The fuselm worker: a module Web Worker that owns the model and all GPU work, so the page's
// main thread never waits on WebGPU. Started by `loadModel(source, { worker: true })`; one model
// per worker. See worker-protocol.ts for the messages.
import { loadLocal, type LocalModel } from "./model.js";
import { FuselmError, toFuselmError } from "./errors.js";
import type { Generation } from "./generation.js";
import type { ModelSource } from "./load.js";
import { toWire, type Reply, type Request, type WireSource } from "./worker-protocol.js";

interface Scope {
  postMessage(message: Reply, transfer?: Transferable[]): void;
  addEventListener(type: "message", listener: (event: MessageEvent<Request>) => void): void;
}
const scope = globalThis as unknown as Scope;

let model: LocalModel | undefined;
const aborts = new Map<number, AbortController>();

const post = (reply: Reply) => scope.postMessage(reply);

function source(s: WireSource): ModelSource {
  if ("url" in s) return s.url;
  if ("blob" in s) return s.blob;
  // A stream's size travels beside it, as a Response's content-length would.
  const headers: Record<string, string> = s.totalBytes === undefined ? {} : { "content-length": String(s.totalBytes) };
  return new Response(s.stream, { headers });
}

function needModel(): LocalModel {
  if (model === undefined) throw new FuselmError("invalid-argument", "this model was disposed");
  return model;
}

async function stream(id: number, generation: Generation): Promise<Reply> {
  for await (const chunk of generation) post({ id, event: "chunk", text: chunk.text, tokenIds: chunk.tokenIds });
  return { id, event: "done", value: await generation.result() };
}

/** The reply to `req`, or undefined when the handler posted it itself (with a transfer). */
async function handle(req: Exclude<Request, { op: "abort" }>, signal: AbortSignal): Promise<Reply | undefined> {
  const id = req.id;
  switch (req.op) {
    case "load": {
      await model?.dispose();
      model = undefined;
      model = await loadLocal(source(req.source), {
        ...req.options,
        signal,
        onProgress: ({ cacheError, ...progress }) =>
          post({ id, event: "progress", progress: cacheError ? { ...progress, cacheError: toWire(cacheError) } : progress }),
      });
      return { id, event: "done", value: model.info };
    }
    case "generate":
      return stream(id, needModel().generate(req.prompt, { ...req.options, signal }));
    case "chat":
      return stream(id, needModel().generateChat(req.messages, { ...req.options, signal }));
    case "tokenize":
      return { id, event: "done", value: await needModel().tokenize(req.text, { addSpecial: req.addSpecial, parseSpecial: req.parseSpecial }) };
    case "detokenize":
      return { id, event: "done", value: await needModel().detokenize(req.ids) };
    case "prepareResponseFormat":
      return { id, event: "done", value: await needModel().prepareResponseFormat(req.format) };
    case "calibrationKey":
      return { id, event: "done", value: await needModel().calibrationKey() };
    case "calibrate": {
      const m = needModel();
      const calibration = await m.calibrate(req.options);
      return { id, event: "done", value: { calibration, info: m.info } };
    }
    case "useCalibration": {
      const m = needModel();
      await m.useCalibration(req.calibration);
      return { id, event: "done", value: m.info };
    }
    case "saveSession": {
      const bytes = await needModel().saveSession();
      // The bytes move to the page instead of being copied.
      scope.postMessage({ id, event: "done", value: bytes }, [bytes.buffer]);
      return undefined;
    }
    case "loadSession":
      return { id, event: "done", value: await needModel().loadSession(req.bytes) };
    case "dispose":
      await model?.dispose();
      model = undefined;
      return { id, event: "done", value: null };
  }
}

scope.addEventListener("message", (event) => {
  const req = event.data;
  if (req.op === "abort") {
    aborts.get(req.id)?.abort();
    return;
  }
  const controller = new AbortController();
  aborts.set(req.id, controller);
  handle(req, controller.signal)
    .then((reply) => reply && post(reply), (e: unknown) => post({ id: req.id, event: "error", error: toWire(toFuselmError(e)) }))
    .finally(() => aborts.delete(req.id));
});
