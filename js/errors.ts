// The one error class of the fuselm API. Every failure a caller may want to handle has a stable
// `kind` (generated from the Rust `ErrorKind` enum), so code can branch without parsing messages:
//
//   try { await probe(); } catch (e) {
//     if (e instanceof FuselmError && e.kind === "webgpu-unavailable") showFallback();
//   }
import type { ErrorKind } from "./wasm/fuselm.js";

export type { ErrorKind };

export class FuselmError extends Error {
  override readonly name = "FuselmError";
  /** What went wrong, as a stable string. */
  readonly kind: ErrorKind;
  /** For `kind === "limit-exceeded"`: the WebGPU limit, what was needed and what the adapter has. */
  readonly limit?: string;
  readonly needed?: number;
  readonly available?: number;

  constructor(kind: ErrorKind, message: string, detail?: { limit?: string; needed?: number; available?: number; cause?: unknown }) {
    super(message, detail?.cause !== undefined ? { cause: detail.cause } : undefined);
    this.kind = kind;
    this.limit = detail?.limit;
    this.needed = detail?.needed;
    this.available = detail?.available;
  }
}

interface RawWasmError {
  name: string;
  message: string;
  kind: ErrorKind;
  limit?: string;
  needed?: number;
  available?: number;
}

function isRawWasmError(e: unknown): e is RawWasmError {
  return e instanceof Error && e.name === "FuselmError" && typeof (e as { kind?: unknown }).kind === "string";
}

/** Converts whatever the wasm module threw into a `FuselmError`. */
export function toFuselmError(e: unknown): FuselmError {
  if (e instanceof FuselmError) return e;
  if (isRawWasmError(e)) {
    return new FuselmError(e.kind, e.message, { limit: e.limit, needed: e.needed, available: e.available, cause: e });
  }
  // A wasm trap (a bug in fuselm) or a browser exception: still typed, never a bare string.
  const message = e instanceof Error ? e.message : String(e);
  return new FuselmError("gpu", `internal error: ${message}`, { cause: e });
}
