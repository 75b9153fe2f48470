// The model cache (js/cache.ts → dist/cache.js) in headless Chromium, for both stores: the first
// open downloads and stores, the second reads from the cache without a request and gives the same
// bytes; a damaged entry fails verification; an incomplete entry (body without metadata) is
// ignored; an aborted download leaves no complete entry. A server in front of scripts/serve.mjs
// counts the GET requests for each model URL. Without Cache Storage / OPFS (Node) the body comes
// from the network. loadModel(url, { cache }) end to end on the synthetic model: the second load
// comes from the cache with the same tokens, a damaged entry is downloaded again. Once on the real model: the CRC-32 throughput and the cache's read times.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { crc32 as zlibCrc32 } from "node:zlib";
import { fileURLToPath } from "node:url";
import { serve } from "../../scripts/serve.mjs";
import { launch } from "./chromium.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const synthetic = "target/site-test/synthetic.gguf";
const realModel = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
const modes = ["cache-api", "opfs"];

const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

// ---- the counting server -------------------------------------------------------------------

/** GET requests per path + query string, for .gguf files. */
const gets = new Map();
const count = (url) => gets.get(url) ?? 0;

let inner, server, base, browser, page, model;
before(async () => {
  assert.ok(existsSync(`${root}dist/cache.js`), "dist/cache.js is missing: build the TypeScript layer (scripts/build-npm)");
  if (!existsSync(`${root}${synthetic}`)) {
    // scripts/test runs `cargo test` first, which leaves the CLI here; never build it from a test.
    assert.ok(existsSync(`${root}target/debug/fuselm`), `${synthetic} is missing and so is target/debug/fuselm`);
    mkdirSync(`${root}target/site-test`, { recursive: true });
    execFileSync(`${root}target/debug/fuselm`, ["synthetic-model", synthetic], { cwd: root, stdio: "inherit" });
  }
  const bytes = readFileSync(`${root}${synthetic}`);
  model = { size: bytes.length, sha256: sha256(bytes), crc32: zlibCrc32(bytes) };

  inner = await serve(0);
  const [handler] = inner.listeners("request");
  server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const key = url.pathname + url.search;
    if (req.method === "GET" && url.pathname.endsWith(".gguf")) gets.set(key, count(key) + 1);
    // `?slow`: the file in 16 KiB pieces every 5 ms, so that a test can abort mid-download.
    if (url.searchParams.has("slow")) {
      const data = readFileSync(`${root}${decodeURIComponent(url.pathname).slice(1)}`);
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": data.length, "cache-control": "no-store" });
      let at = 0;
      const timer = setInterval(() => {
        if (at >= data.length || res.destroyed) {
          clearInterval(timer);
          res.end();
          return;
        }
        res.write(data.subarray(at, at + 16384));
        at += 16384;
      }, 5);
      return;
    }
    handler(req, res);
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  base = `http://127.0.0.1:${server.address().port}`;

  browser = await launch(); // WebGPU (SwiftShader) for the loadModel() tests
  page = await browser.newPage();
  page.on("pageerror", (e) => console.error("page error:", e));
  await page.goto(`${base}/tests/site/pages/cache/`);
  await page.waitForFunction(() => document.body.dataset.state === "ready", null, { timeout: 30_000 });
});
after(async () => {
  await browser?.close();
  server?.close();
  inner?.close();
});

const call = (name, ...args) => page.evaluate(({ name, args }) => window.cacheTest[name](...args), { name, args });
/** A URL of the synthetic model of its own (the query string keys the cache and the counter). */
const modelUrl = (tag, extra = "") => `/${synthetic}?t=${tag}${extra}`;

// ---- tests -----------------------------------------------------------------------------------

test("the CRC-32 is zlib's", async () => {
  for (const text of ["", "a", "123456789", "The quick brown fox jumps over the lazy dog, twice or more."]) {
    assert.equal(await call("crc32", text), zlibCrc32(Buffer.from(text)), JSON.stringify(text));
  }
});

for (const mode of modes) {
  test(`${mode}: the first open downloads and stores, the second reads the cache`, async () => {
    const url = modelUrl(`store-${mode}`);
    // The consumer transfers each chunk away after reading it: the cache keeps its own copy.
    const first = await call("read", url, mode, { detach: true });
    assert.equal(first.error, undefined);
    assert.equal(first.fromCache, false);
    assert.equal(first.totalBytes, model.size);
    assert.equal(first.sha256, model.sha256);
    assert.equal(count(url), 1);
    const entry = await call("entry", url, mode);
    assert.equal(entry.body, model.size);
    assert.equal(entry.meta.length, model.size);
    assert.equal(entry.meta.checksum, model.crc32, "the stored checksum is the CRC-32 of the file");

    const second = await call("read", url, mode);
    assert.equal(second.error, undefined);
    assert.equal(second.fromCache, true);
    assert.equal(second.totalBytes, model.size);
    assert.equal(second.sha256, model.sha256, "the cached bytes are the file's");
    assert.equal(count(url), 1, "no request for a cached model");

    // The other store is separate; deleteCachedModel() empties this one.
    const other = mode === "opfs" ? "cache-api" : "opfs";
    assert.equal((await call("entry", url, other)).meta, null);
    await call("deleteCachedModel", url);
    assert.deepEqual(await call("entry", url, mode), { body: null, meta: null });
    const third = await call("read", url, mode);
    assert.equal(third.fromCache, false);
    assert.equal(count(url), 2);
  });

  test(`${mode}: a damaged entry errors with CacheCorruptError; invalidate() drops it`, async () => {
    const url = modelUrl(`corrupt-${mode}`);
    await call("read", url, mode);
    assert.equal(count(url), 1);
    await call("corrupt", url, mode, Math.floor(model.size / 2));
    assert.equal((await call("entry", url, mode)).body, model.size, "same length, one byte flipped");

    const damaged = await call("read", url, mode, { invalidateOnError: true });
    assert.equal(damaged.fromCache, true);
    assert.equal(damaged.error?.name, "CacheCorruptError");
    assert.equal(damaged.error?.corrupt, true, damaged.error?.message);
    assert.match(damaged.error.message, /corrupt/);
    assert.equal(damaged.length, model.size, "every byte is delivered, the error comes at the end");
    assert.notEqual(damaged.sha256, model.sha256);
    assert.deepEqual(await call("entry", url, mode), { body: null, meta: null }, "invalidate() removed the entry");

    const refetched = await call("read", url, mode);
    assert.equal(refetched.fromCache, false);
    assert.equal(refetched.sha256, model.sha256);
    assert.equal(count(url), 2);
    const again = await call("read", url, mode);
    assert.equal(again.fromCache, true);
    assert.equal(again.error, undefined);
    assert.equal(count(url), 2);
  });

  test(`${mode}: an incomplete entry (a body without metadata) is ignored and replaced`, async () => {
    const url = modelUrl(`incomplete-${mode}`);
    await call("writeIncomplete", url, mode, model.size);
    const first = await call("read", url, mode);
    assert.equal(first.fromCache, false);
    assert.equal(first.error, undefined);
    assert.equal(first.sha256, model.sha256);
    assert.equal(count(url), 1);
    const second = await call("read", url, mode);
    assert.equal(second.fromCache, true);
    assert.equal(second.sha256, model.sha256, "the garbage body was overwritten");
    assert.equal(count(url), 1);
  });

  test(`${mode}: two loads of one URL at once both get the bytes and leave one good entry`, async () => {
    const url = modelUrl(`concurrent-${mode}`);
    const both = await page.evaluate(
      ({ url, mode }) => Promise.all([window.cacheTest.read(url, mode), window.cacheTest.read(url, mode)]),
      { url, mode },
    );
    for (const r of both) {
      assert.equal(r.error, undefined);
      assert.equal(r.sha256, model.sha256);
    }
    assert.equal(count(url), 2);
    const cached = await call("read", url, mode);
    assert.equal(cached.fromCache, true);
    assert.equal(cached.error, undefined);
    assert.equal(cached.sha256, model.sha256);
  });

  test(`${mode}: a worker (loadModel's worker mode) shares the page's entries`, async () => {
    const url = modelUrl(`worker-${mode}`);
    const inWorker = await call("readInWorker", url, mode);
    assert.equal(inWorker.error, undefined, inWorker.error);
    assert.equal(inWorker.fromCache, false);
    assert.equal(inWorker.sha256, model.sha256);
    assert.equal(count(url), 1);
    const inPage = await call("read", url, mode);
    assert.equal(inPage.fromCache, true, "stored by the worker, read by the page");
    assert.equal(inPage.sha256, model.sha256);
    const again = await call("readInWorker", url, mode);
    assert.equal(again.fromCache, true);
    assert.equal(again.sha256, model.sha256);
    assert.equal(count(url), 1);
  });

  test(`${mode}: an aborted download leaves no complete entry`, async () => {
    const url = modelUrl(`abort-${mode}`, "&slow");
    const aborted = await call("read", url, mode, { abortAfter: 64 * 1024 });
    assert.equal(aborted.fromCache, false);
    assert.equal(aborted.error?.kind, "aborted", JSON.stringify(aborted.error));
    assert.ok(aborted.length < model.size, `${aborted.length} bytes read before the abort`);
    assert.equal((await call("entry", url, mode)).meta, null);

    const next = await call("read", url, mode);
    assert.equal(next.fromCache, false);
    assert.equal(next.error, undefined);
    assert.equal(next.sha256, model.sha256);
    assert.equal(count(url), 2);
    assert.equal((await call("read", url, mode)).fromCache, true);
    assert.equal(count(url), 2);
  });
}

test("HTTP errors and refused connections reject with kind network, an abort with aborted", async () => {
  const missing = await call("read", "/target/site-test/missing.gguf", "cache-api");
  assert.equal(missing.opened, false);
  assert.equal(missing.error.kind, "network");
  assert.match(missing.error.message, /HTTP 404/);
  // A port nothing listens on: the server we close right away.
  const closed = createServer();
  await new Promise((ok) => closed.listen(0, "127.0.0.1", ok));
  const { port } = closed.address();
  await new Promise((ok) => closed.close(ok));
  const refused = await call("read", `http://127.0.0.1:${port}/x.gguf`, "opfs");
  assert.equal(refused.error.kind, "network", JSON.stringify(refused.error));
  const preAborted = await page.evaluate(async (url) => {
    const { openModelBody } = await import("/dist/cache.js");
    return openModelBody(new Request(url), "opfs", AbortSignal.abort()).then(() => "opened", (e) => e.kind);
  }, modelUrl("pre-aborted"));
  assert.equal(preAborted, "aborted");
  assert.equal(count(modelUrl("pre-aborted")), 0);
});

test("without Cache Storage or OPFS (Node) the body comes from the network", async () => {
  const { openModelBody, deleteCachedModel } = await import(`${root}dist/cache.js`);
  const url = modelUrl("node");
  for (const mode of [...modes, "none"]) {
    const body = await openModelBody(new Request(base + url), mode);
    assert.equal(body.fromCache, false);
    assert.equal(body.totalBytes, model.size);
    const bytes = Buffer.from(await new Response(body.stream).arrayBuffer());
    assert.equal(sha256(bytes), model.sha256);
    await body.invalidate();
  }
  assert.equal(count(url), 3);
  await deleteCachedModel(base + url);
});

// Each loadModel() compiles the kernels, which takes SwiftShader tens of seconds on a busy 2-core
// machine: three loads in all. The loader treats both stores alike (it only calls openModelBody),
// so Cache Storage gets the cache hit and OPFS the damaged entry.
test("loadModel(): the second load comes from the cache with the same tokens; a damaged entry is downloaded again", async () => {
  const url = modelUrl("load");
  const load = (mode) =>
    page.evaluate(
      async ({ url, mode }) => {
        const { loadModel } = await import("/dist/index.js");
        const progress = [];
        const model = await loadModel(url, { cache: mode, nCtx: 64, onProgress: (p) => progress.push({ ...p }) });
        try {
          const { tokens } = await model.generate("Hello", { maxTokens: 4 }).result();
          return { tokens, fromCache: [...new Set(progress.map((p) => p.fromCache))], last: progress.at(-1) };
        } finally {
          await model.dispose();
        }
      },
      { url, mode },
    );
  const first = await load("cache-api");
  assert.deepEqual(first.fromCache, [false]);
  assert.equal(first.last.totalBytes, model.size);
  assert.equal(first.tokens.length, 4);
  assert.equal(count(url), 1);
  assert.equal((await call("entry", url, "cache-api")).meta?.checksum, model.crc32);

  const second = await load("cache-api");
  assert.deepEqual(second.fromCache, [true], "every progress report of the second load says fromCache");
  assert.equal(second.last.totalBytes, model.size);
  assert.deepEqual(second.tokens, first.tokens, "the cached model generates the same tokens");
  assert.equal(count(url), 1, "no request for a cached model");

  // An OPFS entry with a flipped byte in the tensor data: it parses fine, only the CRC-32 finds it.
  assert.equal((await call("read", url, "opfs")).error, undefined);
  assert.equal(count(url), 2);
  await call("corrupt", url, "opfs", Math.floor(model.size / 2));
  const third = await load("opfs");
  assert.deepEqual(third.fromCache, [true, false], "read from the cache, then downloaded again");
  assert.deepEqual(third.tokens, first.tokens);
  assert.equal(count(url), 3);
  assert.equal((await call("entry", url, "opfs")).meta?.checksum, model.crc32, "the download stored a good entry");
});

test("a full store (QuotaExceededError) stops only the caching: the model loads with a cache error in its progress, and the next load downloads it", async () => {
  for (const mode of modes) {
    const url = modelUrl(`quota-${mode}`);
    const out = await page.evaluate(
      async ({ url, mode }) => {
        const { loadModel } = await import("/dist/index.js");
        const quota = () => new DOMException("the origin's storage quota is used up", "QuotaExceededError");
        // The stores fail as Chromium's do when the quota runs out: Cache Storage consumes the
        // body and rejects the put; an OPFS writable stream rejects its writes.
        const put = Cache.prototype.put;
        const createWritable = FileSystemFileHandle.prototype.createWritable;
        Cache.prototype.put = async function (request, response) {
          if (String(request.url ?? request).includes("quota-") && !String(request.url ?? request).includes("fuselm-meta.invalid")) {
            await response.body?.cancel(quota());
            throw quota();
          }
          return put.call(this, request, response);
        };
        FileSystemFileHandle.prototype.createWritable = async function () {
          return new WritableStream({ write: () => Promise.reject(quota()) });
        };
        try {
          const progress = [];
          const model = await loadModel(url, { cache: mode, nCtx: 64, onProgress: (p) => progress.push(p) });
          try {
            const { tokens } = await model.generate("Hello", { maxTokens: 3 }).result();
            const errors = progress.filter((p) => p.cacheError).map((p) => ({ kind: p.cacheError.kind, message: p.cacheError.message, typed: p.cacheError.name }));
            return { tokens, errors, reports: progress.length, last: progress.at(-1).phase };
          } finally {
            await model.dispose();
          }
        } finally {
          Cache.prototype.put = put;
          FileSystemFileHandle.prototype.createWritable = createWritable;
        }
      },
      { url, mode },
    );
    assert.equal(out.tokens.length, 3, `${mode}: the model loaded and generated`);
    assert.ok(out.errors.length > 0, `${mode}: a cache error was reported`);
    assert.equal(out.errors.at(-1).kind, "cache");
    assert.equal(out.errors.at(-1).typed, "FuselmError");
    assert.match(out.errors.at(-1).message, /QuotaExceededError/);
    assert.equal(out.last, "compile", `${mode}: the last report (compile) carries it too`);
    assert.equal((await call("entry", url, mode)).meta, null, `${mode}: no complete entry`);
    const again = await call("read", url, mode);
    assert.equal(again.fromCache, false, `${mode}: the next load downloads`);
    assert.equal(count(url), 2);
  }
});

test("the real model: CRC-32 throughput and cache read times", { skip: !existsSync(`${root}${realModel}`) && `${realModel} is missing (scripts/fetch-model)` }, async (t) => {
  const url = `/${realModel}`;
  const size = statSync(`${root}${realModel}`).size;
  const crc = await call("checksumThroughput", url);
  assert.equal(crc.bytes, size);
  assert.equal(crc.crc, zlibCrc32(readFileSync(`${root}${realModel}`)));
  const report = [`CRC-32 over ${(size / 1e6).toFixed(1)} MB: ${crc.mbPerSecond.toFixed(0)} MB/s (runs ${crc.ms.map((m) => m.toFixed(0)).join(", ")} ms)`];
  const network = await call("timedRead", url, "none");
  report.push(`none: download ${network.ms.toFixed(0)} ms`);
  for (const mode of modes) {
    await call("deleteCachedModel", url, mode);
    const download = await call("timedRead", url, mode);
    const cached = await call("timedRead", url, mode);
    assert.equal(download.fromCache, false);
    assert.equal(cached.fromCache, true);
    assert.equal(download.length, size);
    assert.equal(cached.length, size);
    report.push(`${mode}: download + store ${download.ms.toFixed(0)} ms, read + verify ${cached.ms.toFixed(0)} ms`);
    await call("deleteCachedModel", url, mode);
  }
  for (const line of report) t.diagnostic(line);
});
