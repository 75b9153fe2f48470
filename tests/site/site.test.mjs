// Opens the example site in headless Chromium (WebGPU on SwiftShader) and checks that it shows
// the adapter report; then checks the typed error when the browser has no WebGPU at all.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { serve } from "../../scripts/serve.mjs";
import { launch } from "./chromium.mjs";

let server, base;
before(async () => {
  server = await serve(0);
  base = `http://127.0.0.1:${server.address().port}`;
});
after(() => server.close());

async function open(browser, url, init) {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e));
  if (init) await page.addInitScript(init);
  await page.goto(url);
  await page.waitForFunction(() => ["done", "error"].includes(document.body.dataset.state), null, { timeout: 120_000 });
  return { page, errors };
}

test("example site shows the SwiftShader adapter report with benchmarks", async () => {
  const browser = await launch();
  try {
    const { page, errors } = await open(browser, `${base}/examples/site/?bench`);
    const state = await page.evaluate(() => document.body.dataset.state);
    assert.equal(state, "done", await page.textContent("#status"));
    const report = JSON.parse(await page.textContent("#report"));
    assert.equal(report.adapter.architecture, "swiftshader");
    assert.equal(report.adapter.isSoftware, true);
    assert.equal(report.features.shaderF16, false, "SwiftShader has no shader-f16");
    assert.ok(report.limits.maxStorageBufferBindingSize >= report.webgpuDefaults.maxStorageBufferBindingSize);
    assert.ok(report.bench.dependentDispatch.median > 0);
    assert.ok(report.bench.readBandwidthManyWorkgroups.median > 0);
    // The tables a user reads are rendered, not only the JSON.
    const limitsRows = await page.locator("#limits tbody tr").count();
    assert.equal(limitsRows, Object.keys(report.limits).length);
    assert.match(await page.textContent("#bench-table"), /dependent dispatch/);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test("without WebGPU the page shows the typed webgpu-unavailable error", async () => {
  const browser = await launch();
  try {
    // Remove navigator.gpu before any page script runs, as in a browser without WebGPU.
    const { page } = await open(browser, `${base}/examples/site/`, () => {
      delete Object.getPrototypeOf(navigator).gpu;
    });
    assert.equal(await page.evaluate(() => document.body.dataset.state), "error");
    assert.equal(await page.evaluate(() => document.body.dataset.errorKind), "webgpu-unavailable");
  } finally {
    await browser.close();
  }
});

test("a browser whose WebGPU yields no adapter gets the typed no-adapter error", async () => {
  // Chromium without the SwiftShader/unsafe-WebGPU flags on a GPU-less machine returns a null
  // adapter (or no navigator.gpu on some builds): either way a typed error, never a crash.
  const browser = await launch({ webgpu: false });
  try {
    const { page } = await open(browser, `${base}/examples/site/`);
    assert.equal(await page.evaluate(() => document.body.dataset.state), "error");
    const kind = await page.evaluate(() => document.body.dataset.errorKind);
    assert.ok(["no-adapter", "webgpu-unavailable"].includes(kind), kind);
  } finally {
    await browser.close();
  }
});
