// `model.calibrate()`: the planner's optional calibration run, with a cache. The measuring is done
// in Rust (a short greedy generation per strategy, timed end to end); this module looks up and
// saves the result under the model's calibration key (crate version, adapter, model shape), so a
// page measures once per device and model and applies the saved result on later visits.
import type { CalibrateOptions, Calibration } from "./wasm/fuselm.js";
import { FuselmError } from "./errors.js";

/** Where calibrations are kept: `localStorage`, `sessionStorage`, or anything with these two methods. */
export type CalibrationStore = Pick<Storage, "getItem" | "setItem">;

/** Options of `model.calibrate`: the measurement's settings plus a cache. */
export interface CalibrateCallOptions extends CalibrateOptions {
  /**
   * Reuse a calibration saved for this model on this adapter instead of measuring, and save a new
   * one: `true` uses `localStorage` (where the environment has none, it measures every time), or
   * pass your own store. Default: false (always measure).
   */
  cache?: boolean | CalibrationStore;
}

/** What the model side provides: on this thread the wasm model, in worker mode messages. */
export interface CalibrationBackend {
  key(): Promise<string>;
  measure(options: CalibrateOptions): Promise<Calibration>;
  apply(calibration: Calibration): Promise<void>;
}

const PREFIX = "fuselm.calibration.v1:";

function storeOf(cache: CalibrateCallOptions["cache"]): CalibrationStore | undefined {
  if (cache === undefined || cache === false) return undefined;
  if (cache === true) {
    try {
      return (globalThis as { localStorage?: CalibrationStore }).localStorage;
    } catch {
      return undefined; // e.g. storage disabled for this origin
    }
  }
  if (typeof cache?.getItem !== "function" || typeof cache?.setItem !== "function") {
    throw new FuselmError("invalid-argument", "cache must be a boolean or an object with getItem and setItem");
  }
  return cache;
}

/** `model.calibrate(options)` for any backend. */
export async function calibrateWith(backend: CalibrationBackend, options: CalibrateCallOptions = {}): Promise<Calibration> {
  const { cache, ...settings } = options;
  const store = storeOf(cache);
  if (store === undefined) return backend.measure(settings);
  const key = PREFIX + (await backend.key());
  let saved: Calibration | undefined;
  try {
    const text = store.getItem(key);
    saved = text ? (JSON.parse(text) as Calibration) : undefined;
  } catch {
    saved = undefined; // unreadable entry: measure again and overwrite it
  }
  if (saved !== undefined) {
    try {
      await backend.apply(saved);
      return { ...saved, fromCache: true };
    } catch (e) {
      // A stale or foreign entry (another version, a strategy that cannot run now): measure.
      if (!(e instanceof FuselmError) || e.kind !== "invalid-argument") throw e;
    }
  }
  const measured = await backend.measure(settings);
  try {
    store.setItem(key, JSON.stringify({ ...measured, fromCache: false }));
  } catch {
    // A full or read-only store: the calibration still applies to this model.
  }
  return measured;
}
