// Reads a model body with /dist/cache.js inside a module worker (where loadModel's worker mode
// opens it) and posts back where it came from and the bytes' SHA-256.
import { openModelBody } from "/dist/cache.js";

addEventListener("message", async ({ data: { url, mode } }) => {
  try {
    const body = await openModelBody(new Request(new URL(url, location.href)), mode);
    const bytes = await new Response(body.stream).arrayBuffer();
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    const sha256 = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
    postMessage({ fromCache: body.fromCache, length: bytes.byteLength, sha256 });
  } catch (e) {
    postMessage({ error: `${e?.name}: ${e?.message}` });
  }
});
