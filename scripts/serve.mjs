// A tiny static file server for the example site (no dependencies). Serves the repository root
// so the page can import the built package from /dist/ and fetch models from /models/.
// Usage: node scripts/serve.mjs [port]   (port 0 picks a free one; the site's URL is printed)
// `/` redirects to the site's landing page, /examples/site/.
import { createServer } from "node:http";
import { createReadStream, statSync } from "node:fs";
import { extname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(fileURLToPath(new URL("..", import.meta.url)));
const types = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".wasm": "application/wasm",
  ".gguf": "application/octet-stream",
  ".map": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".md": "text/markdown; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
};

const site = "/examples/site/";

/**
 * A static file server for `dir` (not yet listening): the MIME types a browser needs
 * (application/wasm lets wasm-bindgen use WebAssembly.instantiateStreaming), no caching, HEAD,
 * nothing outside `dir`. `redirects` maps exact paths to locations; `cors` allows any origin.
 */
export function staticServer(dir, { redirects = {}, cors = false } = {}) {
  const base = resolve(dir);
  return createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (Object.hasOwn(redirects, url.pathname)) {
      res.writeHead(302, { location: redirects[url.pathname] }).end();
      return;
    }
    let path = normalize(join(base, decodeURIComponent(url.pathname)));
    if (path !== base && !path.startsWith(base + sep)) {
      res.writeHead(403).end();
      return;
    }
    try {
      if (statSync(path).isDirectory()) path = join(path, "index.html");
      const size = statSync(path).size;
      res.writeHead(200, {
        "content-type": types[extname(path)] ?? "application/octet-stream",
        "content-length": size,
        "cache-control": "no-store",
        ...(cors ? { "access-control-allow-origin": "*" } : {}),
      });
      if (req.method === "HEAD") res.end();
      else createReadStream(path).pipe(res);
    } catch {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found");
    }
  });
}

/** Serves `dir` on 127.0.0.1 (port 0: a free one); resolves to `{ server, url }`. */
export function serveDir(dir, port = 0) {
  const server = staticServer(dir);
  return new Promise((ok) =>
    server.listen(port, "127.0.0.1", () => ok({ server, url: `http://127.0.0.1:${server.address().port}/` })),
  );
}

/** The repository root, `/` leading to the example site. The wasm-bindgen-test page runs on
 * another origin and fetches the model from here, hence CORS. */
export function serve(port = 0) {
  const server = staticServer(root, { redirects: { "/": site, "/examples/site": site }, cors: true });
  return new Promise((ok) => server.listen(port, "127.0.0.1", () => ok(server)));
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const server = await serve(Number(process.argv[2] ?? 8080));
  const { port } = server.address();
  const base = `http://127.0.0.1:${port}${site}`;
  console.log(`fuselm example site: ${base}`);
  console.log(`  chat:  ${base}chat.html`);
  console.log(`  bench: ${base}bench.html`);
  console.log("(Ctrl-C to stop)");
}
