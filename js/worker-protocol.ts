// The messages between a page and the fuselm worker (`loadModel(source, { worker: true })`).
// Requests carry an id; the worker answers each with events for that id and finally a `done`
// or `error`. Errors cross as plain data and become `FuselmError`s again on the page.
import type { CalibrateOptions, Calibration, ChatMessage, GenerateOptions, GenerateResult, LoadOptions, ModelInfo, PreparedFormat, ResponseFormat, SessionInfo } from "./wasm/fuselm.js";
import type { CacheMode } from "./cache.js";
import type { LoadProgress } from "./load.js";
import { FuselmError, type ErrorKind } from "./errors.js";

/** A model source after crossing to the worker: a URL, a Blob, or a (transferred) stream. */
export type WireSource =
  | { url: string }
  | { blob: Blob }
  | { stream: ReadableStream<Uint8Array>; totalBytes: number | undefined };

export interface WireLoadOptions extends LoadOptions {
  cache?: CacheMode;
}

export type Request =
  | { id: number; op: "load"; source: WireSource; options: WireLoadOptions }
  | { id: number; op: "generate"; prompt: string; options: GenerateOptions }
  | { id: number; op: "chat"; messages: ChatMessage[]; options: GenerateOptions }
  | { id: number; op: "tokenize"; text: string; addSpecial: boolean; parseSpecial: boolean }
  | { id: number; op: "detokenize"; ids: number[] }
  | { id: number; op: "prepareResponseFormat"; format: ResponseFormat }
  | { id: number; op: "calibrationKey" }
  /** Measures; answers `{ calibration, info }`. */
  | { id: number; op: "calibrate"; options: CalibrateOptions }
  /** Applies a saved calibration; answers the updated info. */
  | { id: number; op: "useCalibration"; calibration: Calibration }
  /** Answers the session's bytes (transferred). */
  | { id: number; op: "saveSession" }
  /** `bytes` transferred; answers the `SessionInfo`. */
  | { id: number; op: "loadSession"; bytes: Uint8Array }
  | { id: number; op: "dispose" }
  /** Aborts the load or generation with this id. */
  | { id: number; op: "abort" };

export interface WireError {
  kind: ErrorKind;
  message: string;
  limit?: string;
  needed?: number;
  available?: number;
}

export type Reply =
  | { id: number; event: "progress"; progress: WireProgress }
  | { id: number; event: "chunk"; text: string; tokenIds: number[] }
  | { id: number; event: "done"; value: ModelInfo | GenerateResult | PreparedFormat | SessionInfo | Uint8Array | number[] | string | { calibration: Calibration; info: ModelInfo } | null }
  | { id: number; event: "error"; error: WireError };

/** A `LoadProgress` as posted: its `cacheError` as a `WireError` (an Error loses its kind in a
 * structured clone). */
export type WireProgress = Omit<LoadProgress, "cacheError"> & { cacheError?: WireError };

export function toWire(e: FuselmError): WireError {
  return { kind: e.kind, message: e.message, limit: e.limit, needed: e.needed, available: e.available };
}

export function fromWire(w: WireError): FuselmError {
  return new FuselmError(w.kind, w.message, { limit: w.limit, needed: w.needed, available: w.available });
}
