// The bench page as a person uses it: open it, see that it detected the software adapter and chose
// a small run, press "Run benchmarks", read the side-by-side table and the chart, download the JSON.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { launch } from "./chromium.mjs";
import { assertNoProblems, expectState, openPage, screenshot, startServer } from "./page.mjs";

let server, base;
before(async () => ({ server, base } = await startServer()));
after(() => server?.close());

test("the bench page runs every strategy on the toy grid, charts it and downloads the JSON", async () => {
  const browser = await launch();
  try {
    const { page, problems } = await openPage(browser, `${base}/examples/site/bench.html`);
    // The page asks probe() first; on SwiftShader it shrinks the defaults to a small run.
    await page.getByText("a CPU adapter").waitFor({ timeout: 60_000 });
    assert.equal(await page.inputValue("#runs"), "1");
    assert.equal(await page.isChecked("#small-toy"), true);
    assert.equal(await page.isChecked("#toy"), true);

    await page.click("#run");
    await page.waitForFunction(() => document.body.dataset.state === "running");
    assert.equal(await page.isDisabled("#run"), true, "no second run while one is going");
    await expectState(page, "done", 300_000);

    // The side-by-side table: one row per workload, a column per strategy.
    const workloads = await page.locator("#side-by-side tbody tr").count();
    assert.ok(workloads >= 4, `${workloads} workloads`);
    const header = await page.locator("#side-by-side thead").textContent();
    assert.match(header, /unfused tok\/s/);
    assert.match(header, /fused tok\/s/);
    assert.match(header, /fused × unfused/);

    // Download JSON: the whole report, as a file.
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#download")]);
    assert.match(download.suggestedFilename(), /^fuselm-bench-\d{4}-\d\d-\d\d\.json$/);
    const saved = JSON.parse(readFileSync(await download.path(), "utf8"));
    assert.equal(saved.kind, "fuselm-bench-browser");
    assert.equal(saved.adapter.architecture, "swiftshader");
    assert.deepEqual(saved.options, { runs: 1, toy: true, smallToy: true, chunkTokens: 32 });
    const results = saved.report.results;
    assert.equal(results.length, workloads * 3, "fused, unfused and megakernel on every workload");
    assert.deepEqual(new Set(results.map((r) => r.strategy)), new Set(["fused", "unfused", "megakernel"]));
    for (const r of results) {
      assert.ok(r.decodeTokensPerSecond.median > 0, `${r.workload} ${r.strategy}`);
      assert.equal(r.idsEqualAcrossStrategies, true, `${r.workload}: the strategies generate the same ids`);
    }

    // The tables and the chart show those numbers: one bar per measurement, labelled.
    assert.equal(await page.locator("#results tbody tr").count(), results.length);
    assert.equal(await page.locator("#chart svg rect").count(), results.length);
    const bars = await page.locator("#chart svg rect").evaluateAll((rects) =>
      rects.map((r) => ({ width: Number(r.getAttribute("width")), title: r.querySelector("title").textContent })),
    );
    for (const bar of bars) {
      const [, workload, strategy, value] = bar.title.match(/^(.*) · (\w+): ([\d,.]+) tok\/s/);
      const row = results.find((r) => r.workload === workload && r.strategy === strategy);
      assert.ok(row, bar.title);
      assert.ok(Math.abs(Number(value.replaceAll(",", "")) - row.decodeTokensPerSecond.median) <= 0.051, bar.title);
    }
    const fastest = results.reduce((a, b) => (a.decodeTokensPerSecond.median >= b.decodeTokensPerSecond.median ? a : b));
    const longest = bars.reduce((a, b) => (a.width >= b.width ? a : b));
    assert.ok(longest.title.startsWith(`${fastest.workload} · ${fastest.strategy}:`), "the longest bar is the fastest row");
    assert.match(await page.textContent("#markdown"), /\| workload \| strategy \|/);
    await screenshot(page, "bench");
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});
