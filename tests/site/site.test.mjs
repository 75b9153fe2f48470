// Opens the example site's landing page (the adapter probe) in headless Chromium (WebGPU on
// SwiftShader) and checks that it shows the adapter report and links every page; then checks the
// typed error when the browser has no WebGPU at all.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { launch } from "./chromium.mjs";
import { assertNoProblems, openPage, screenshot, startServer, waitState } from "./page.mjs";

let server, base;
before(async () => ({ server, base } = await startServer()));
after(() => server?.close());

async function open(browser, url, options) {
  const { page, problems } = await openPage(browser, url, options);
  await waitState(page, ["done", "error"]);
  return { page, problems };
}

test("example site shows the SwiftShader adapter report with benchmarks", async () => {
  const browser = await launch();
  try {
    const { page, problems } = await open(browser, `${base}/examples/site/?bench`);
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
    assert.match(await page.textContent("#verdict"), /software adapter/);
    assert.match(await page.textContent("#verdict"), /shader-f16 ✗/);
    await screenshot(page, "probe");

    // A person probes again without the benchmarks.
    await page.uncheck("#bench");
    await page.click("#probe");
    await waitState(page, ["done", "error"]);
    assert.equal(await page.evaluate(() => document.body.dataset.state), "done");
    assert.equal(JSON.parse(await page.textContent("#report")).bench, undefined);
    assert.equal(await page.isHidden("#bench-table"), true);
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

test("the server's root leads to the site, and the nav bar links every page", async () => {
  const browser = await launch();
  try {
    const { page, problems } = await open(browser, `${base}/`);
    assert.equal(new URL(page.url()).pathname, "/examples/site/");
    for (const [name, path, title] of [
      ["Chat", "/examples/site/chat.html", /chat/],
      ["Bench", "/examples/site/bench.html", /bench/],
      ["Generate", "/examples/site/generate.html", /generate/],
      ["Extract", "/examples/site/extract.html", /extract/],
      ["Tools", "/examples/site/tools.html", /tools/],
      ["Probe", "/examples/site/", /what can this GPU do/],
    ]) {
      await page.click(`header nav >> text=${name}`);
      await page.waitForURL((u) => u.pathname === path);
      assert.match(await page.title(), title);
      assert.equal(await page.getAttribute(`header nav a[aria-current="page"]`, "href").then((h) => new URL(h, page.url()).pathname), path);
    }
    await waitState(page, ["done", "error"]);
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

test("without WebGPU the page shows the typed webgpu-unavailable error", async () => {
  const browser = await launch();
  try {
    // Remove navigator.gpu before any page script runs, as in a browser without WebGPU.
    const { page, problems } = await open(browser, `${base}/examples/site/`, {
      init: () => {
        delete Object.getPrototypeOf(navigator).gpu;
      },
    });
    assert.equal(await page.evaluate(() => document.body.dataset.state), "error");
    assert.equal(await page.evaluate(() => document.body.dataset.errorKind), "webgpu-unavailable");
    assert.match(await page.textContent("#status"), /^webgpu-unavailable: \S/);
    assert.match(await page.textContent("#verdict"), /no usable WebGPU adapter/);
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

test("a browser whose WebGPU yields no adapter gets the typed no-adapter error", async () => {
  // Chromium without the SwiftShader/unsafe-WebGPU flags on a GPU-less machine returns a null
  // adapter (or no navigator.gpu on some builds): either way a typed error, never a crash.
  const browser = await launch({ webgpu: false });
  try {
    const { page, problems } = await open(browser, `${base}/examples/site/`);
    assert.equal(await page.evaluate(() => document.body.dataset.state), "error");
    const kind = await page.evaluate(() => document.body.dataset.errorKind);
    assert.ok(["no-adapter", "webgpu-unavailable"].includes(kind), kind);
    await screenshot(page, "probe-no-adapter");
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});
