// Loads the wasm module once. By default the .wasm file is fetched from next to the JS file
// (import.meta.url), which works from a bundler, a CDN or a static site's node_modules copy.
import initWasm, { type InitInput } from "./wasm/fuselm.js";

let ready: Promise<void> | undefined;

/**
 * Loads and instantiates the wasm module. Called implicitly by every API function; call it
 * yourself to preload, or to pass the `.wasm` from somewhere else (a URL, a `Response`, bytes).
 */
export function init(wasm?: InitInput | Promise<InitInput>): Promise<void> {
  ready ??= initWasm(wasm === undefined ? undefined : { module_or_path: wasm }).then(() => undefined);
  return ready;
}
