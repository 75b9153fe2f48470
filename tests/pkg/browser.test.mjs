// The packed npm tarball in two kinds of downstream app, each generating text from the synthetic
// model in headless Chromium (WebGPU on SwiftShader):
//   - a fresh Vite + TypeScript app (vite-app/): `tsc --noEmit` then `vite build` with the
//     repository's own vite; the bundle must find the wasm that Vite emitted as an asset
//     (wasm-bindgen's `new URL("fuselm_bg.wasm", import.meta.url)`);
//   - a plain static page (static-page/) importing ./node_modules/fuselm/dist/index.js, no bundler.
// Both copy the committed app to a scratch directory, `npm install --offline` the tarball there,
// serve it statically with the model next to the page, and read what the page reports.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, cpSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { bin, install, root, runPage, scratch, syntheticModel, tarball } from "./common.mjs";
import { serveDir } from "../../scripts/serve.mjs";

// The synthetic vocabulary: id b < 256 is byte b; the control tokens render as nothing.
const decodeSynthetic = (ids) => new TextDecoder("utf-8").decode(Uint8Array.from(ids.filter((id) => id < 256)));

let tgz, model;
const generated = {}; // per app: the ids, which must agree (greedy, same package, same model)
before(() => {
  tgz = tarball();
  model = syntheticModel();
});

/** One generation's report (a mode of the page): streamed vs final, the load phases. */
function checkMode(result, mode) {
  assert.ok(result.tokens.length > 0, `${mode}: no tokens generated`);
  assert.ok(result.tokens.every((id) => Number.isInteger(id) && id >= 0), `${mode}: token ids ${result.tokens}`);
  assert.equal(result.text, decodeSynthetic(result.tokens), `${mode}: text vs the synthetic vocabulary's bytes`);
  assert.deepEqual(result.streamedIds, result.tokens, `${mode}: ids streamed by \`for await\` vs result().tokens`);
  assert.equal(result.streamedText, result.text, `${mode}: text streamed by \`for await\` vs result().text`);
  const phases = ["download", "parse", "upload", "compile"];
  assert.ok(result.phases.length > 0 && result.phases.every((p) => phases.includes(p)), `${mode}: load phases ${result.phases}`);
  assert.equal(result.phases.at(-1), "compile", `${mode}: load phases ${result.phases}`);
}

/** The page's run: both modes generated the same ids; the wasm and the worker script came from `paths`. */
function checkGenerated(run, paths) {
  assert.deepEqual(run.pageErrors, [], "uncaught page errors");
  assert.equal(run.state, "done", `the page failed: ${run.error}\n${run.consoleLines.join("\n")}`);
  const { main, worker } = run.result;
  checkMode(main, "main thread");
  checkMode(worker, "worker");
  assert.deepEqual(worker.tokens, main.tokens, "worker vs main thread ids");
  const failed = run.responses.filter((r) => r.status >= 400 && !r.url.endsWith("/favicon.ico"));
  assert.deepEqual(failed, [], "failed requests");
  for (const [what, path] of Object.entries(paths)) {
    const hits = run.responses.filter((r) => path.test(new URL(r.url).pathname));
    assert.ok(hits.length > 0, `no request for the ${what} (${path}): ${run.responses.map((r) => r.url).join(" ")}`);
  }
  const wasm = run.responses.filter((r) => r.url.endsWith(".wasm"));
  assert.ok(wasm.every((r) => paths.wasm.test(new URL(r.url).pathname)), `wasm requests: ${JSON.stringify(wasm)}`);
  return main;
}

test("a Vite + TypeScript app bundles the package and generates", async () => {
  const app = scratch("vite-app");
  cpSync(join(root, "tests/pkg/vite-app"), app, { recursive: true });
  install(app, tgz);
  // What the app's `npm run build` does (tsc --noEmit && vite build), with the repository's tools.
  execFileSync(bin("tsc"), ["--noEmit", "-p", "tsconfig.json"], { cwd: app, stdio: "inherit" });
  execFileSync(bin("vite"), ["build", "--logLevel", "warn"], { cwd: app, stdio: "inherit" });
  const assets = readdirSync(join(app, "dist/assets"));
  const emitted = assets.filter((f) => f.endsWith(".wasm"));
  assert.equal(emitted.length, 1, `vite emitted wasm assets: ${assets}`);
  const shipped = readFileSync(join(app, "node_modules/fuselm/dist/wasm/fuselm_bg.wasm"));
  assert.ok(readFileSync(join(app, "dist/assets", emitted[0])).equals(shipped), "the emitted wasm is the package's");
  copyFileSync(model, join(app, "dist/synthetic.gguf"));
  const { server, url } = await serveDir(join(app, "dist"));
  try {
    const result = checkGenerated(await runPage(url), {
      wasm: /^\/assets\/fuselm_bg-[\w-]+\.wasm$/,
      "worker script": /^\/assets\/worker-[\w-]+\.js$/,
    });
    console.log(`vite app: ${result.tokens.length} tokens: ${JSON.stringify(result.text)}; the same in the worker`);
    generated.vite = result.tokens;
  } finally {
    server.close();
  }
});

test("a static page imports ./node_modules/fuselm/dist/index.js and generates", async () => {
  const site = scratch("static-page");
  cpSync(join(root, "tests/pkg/static-page"), site, { recursive: true });
  install(site, tgz);
  copyFileSync(model, join(site, "synthetic.gguf"));
  const { server, url } = await serveDir(site);
  try {
    const result = checkGenerated(await runPage(url), {
      wasm: /^\/node_modules\/fuselm\/dist\/wasm\/fuselm_bg\.wasm$/,
      "worker script": /^\/node_modules\/fuselm\/dist\/worker\.js$/,
    });
    console.log(`static page: ${result.tokens.length} tokens: ${JSON.stringify(result.text)}; the same in the worker`);
    if (generated.vite) assert.deepEqual(result.tokens, generated.vite, "the static page and the Vite app disagree");
  } finally {
    server.close();
  }
});
