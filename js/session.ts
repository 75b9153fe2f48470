// Saved sessions in the browser: `storeSession`, `readSession` and `deleteSession` keep the bytes
// of `model.saveSession()` in the origin private file system ("opfs", the default) or in Cache
// Storage ("cache-api") under a name the app chooses, so a conversation survives a reload.
//
// Layout (version 1):
//   opfs       `navigator.storage.getDirectory()` → directory "fuselm-sessions" →
//              `<encodeURIComponent(name)>.session`, written with createWritable() (the file is
//              replaced only when the write completes, so a reload mid-write keeps the old one);
//   cache-api  `caches.open("fuselm-sessions-v1")`, keyed by
//              `https://fuselm-session.invalid/v1?name=<encoded name>` (`.invalid`: a reserved TLD,
//              never a real resource).
// The bytes carry their own checksum and model identity, which `model.loadSession` checks, so the
// store adds none: a damaged or foreign entry is refused there with kind "session".
import { FuselmError } from "./errors.js";

/** Where `storeSession` keeps a session: the origin private file system or Cache Storage. */
export type SessionStore = "opfs" | "cache-api";

export interface SessionStoreOptions {
  /** Default: "opfs". */
  store?: SessionStore;
}

const DIRECTORY = "fuselm-sessions";
const CACHE = "fuselm-sessions-v1";
/** Longest name: OPFS names are limited (255 bytes in Chromium) and the name is escaped. */
const MAX_NAME = 100;

/** `loadSession`'s argument as bytes, or a typed error naming it. */
export function sessionBytes(bytes: unknown): Uint8Array {
  if (bytes instanceof Uint8Array) return bytes;
  if (bytes instanceof ArrayBuffer) return new Uint8Array(bytes);
  throw new FuselmError("invalid-argument", "loadSession(bytes): bytes must be a Uint8Array or an ArrayBuffer (as saveSession() resolves)");
}

function checkName(name: unknown): string {
  if (typeof name !== "string" || name.length === 0 || name.length > MAX_NAME) {
    throw new FuselmError("invalid-argument", `name must be a string of 1 to ${MAX_NAME} characters`);
  }
  return name;
}

function storeOf(options: SessionStoreOptions): SessionStore {
  const store = options.store ?? "opfs";
  if (store !== "opfs" && store !== "cache-api") {
    throw new FuselmError("invalid-argument", `store must be "opfs" or "cache-api", got ${JSON.stringify(store)}`);
  }
  return store;
}

function cacheError(what: string, e: unknown): FuselmError {
  const reason = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  return new FuselmError("cache", `${what}: ${reason}`, { cause: e });
}

async function directory(): Promise<FileSystemDirectoryHandle> {
  if (typeof navigator === "undefined" || navigator.storage?.getDirectory === undefined) {
    throw new FuselmError("cache", "this environment has no origin private file system (store \"opfs\")");
  }
  const root = await navigator.storage.getDirectory();
  return root.getDirectoryHandle(DIRECTORY, { create: true });
}

async function cache(): Promise<Cache> {
  if (typeof caches === "undefined") throw new FuselmError("cache", "this environment has no Cache Storage (store \"cache-api\")");
  return caches.open(CACHE);
}

const fileName = (name: string) => `${encodeURIComponent(name)}.session`;
const cacheKey = (name: string) => `https://fuselm-session.invalid/v1?name=${encodeURIComponent(name)}`;

/**
 * Keeps `bytes` (from `model.saveSession()`) under `name`, replacing what was there. Rejects with
 * kind "cache" when the store is unavailable or full (`QuotaExceededError` in the message), the
 * previous entry then still in place; "invalid-argument" for a bad name or store.
 *
 * ```ts
 * await storeSession("chat", await model.saveSession());
 * ```
 */
export async function storeSession(name: string, bytes: Uint8Array, options: SessionStoreOptions = {}): Promise<void> {
  const key = checkName(name);
  const store = storeOf(options);
  if (!(bytes instanceof Uint8Array)) throw new FuselmError("invalid-argument", "bytes must be a Uint8Array (as saveSession() resolves)");
  try {
    if (store === "opfs") {
      const file = await (await directory()).getFileHandle(fileName(key), { create: true });
      const writable = await file.createWritable();
      try {
        await writable.write(bytes as Uint8Array<ArrayBuffer>);
        await writable.close();
      } catch (e) {
        await writable.abort().catch(() => {});
        throw e;
      }
    } else {
      await (await cache()).put(cacheKey(key), new Response(bytes as Uint8Array<ArrayBuffer>));
    }
  } catch (e) {
    throw e instanceof FuselmError ? e : cacheError(`storing session ${JSON.stringify(key)} (${store})`, e);
  }
}

/** The bytes stored under `name`, or `undefined` when there are none. Rejects with kind "cache"
 * when the store is unavailable. */
export async function readSession(name: string, options: SessionStoreOptions = {}): Promise<Uint8Array | undefined> {
  const key = checkName(name);
  const store = storeOf(options);
  try {
    if (store === "opfs") {
      const dir = await directory();
      const file = await dir.getFileHandle(fileName(key)).catch((e: unknown) => {
        if (e instanceof DOMException && e.name === "NotFoundError") return undefined;
        throw e;
      });
      if (file === undefined) return undefined;
      return new Uint8Array(await (await file.getFile()).arrayBuffer());
    }
    const response = await (await cache()).match(cacheKey(key));
    return response === undefined ? undefined : new Uint8Array(await response.arrayBuffer());
  } catch (e) {
    throw e instanceof FuselmError ? e : cacheError(`reading session ${JSON.stringify(key)} (${store})`, e);
  }
}

/** Removes the session stored under `name` (nothing happens when there is none). */
export async function deleteSession(name: string, options: SessionStoreOptions = {}): Promise<void> {
  const key = checkName(name);
  const store = storeOf(options);
  try {
    if (store === "opfs") {
      await (await directory()).removeEntry(fileName(key)).catch((e: unknown) => {
        if (!(e instanceof DOMException && e.name === "NotFoundError")) throw e;
      });
    } else {
      await (await cache()).delete(cacheKey(key));
    }
  } catch (e) {
    throw e instanceof FuselmError ? e : cacheError(`deleting session ${JSON.stringify(key)} (${store})`, e);
  }
}
