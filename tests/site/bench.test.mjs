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
    assert.equal(await page.inputValue("#toy-tokens"), "8");

    await page.click("#run");
    await page.waitForFunction(() => document.body.dataset.state === "running");
    assert.equal(await page.isDisabled("#run"), true, "no second run while one is going");
    // A guard against a hang, not a speed bound: the run (64 tokens per workload then) took
    // 280 s alone on CI's two cores (2026-11-27) and over 300 s beside the other browser
    // suites of `npm test`.
    await expectState(page, "done", 900_000);

    // The side-by-side table: one row per workload, a column per strategy.
    const workloads = await page.locator("#side-by-side tbody tr").count();
    assert.equal(workloads, 2, "the small grid: d_model 32 and 64 at one layer");
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
    assert.deepEqual(saved.options, { runs: 1, toy: true, smallToy: true, toyTokens: 8, chunkTokens: 32 });
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

    // The crossover chart: a line per strategy through every workload, auto's pick ringed.
    // On a software adapter the planner picks the megakernel for these small models.
    // One line per strategy and depth (the small grid's one) across the widths.
    assert.equal(await page.locator("#crossover svg polyline").count(), 3);
    assert.equal(await page.locator("#crossover svg circle.point").count(), results.length);
    assert.equal(await page.locator("#crossover svg circle.auto-pick").count(), workloads);
    for (const w of new Set(results.map((r) => r.workload))) {
      const picked = results.filter((r) => r.workload === w && r.pickedByAuto).map((r) => r.strategy);
      assert.deepEqual(picked, ["megakernel"], w);
    }
    const autoColumn = await page.locator("#side-by-side tbody tr td:nth-last-child(2)").allTextContents();
    assert.deepEqual(autoColumn, Array(workloads).fill("megakernel"));
    await screenshot(page, "bench");
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

test("the bench page shows a saved report: the H200's toy grid with its crossovers", async () => {
  const browser = await launch();
  try {
    const file = "bench/results/megakernel-h200-2026-11-24-548148e/toy.json";
    const saved = JSON.parse(readFileSync(new URL(`../../${file}`, import.meta.url), "utf8"));
    const { page, problems } = await openPage(browser, `${base}/examples/site/bench.html?report=../../${file}`);
    await expectState(page, "done", 60_000);
    assert.match(await page.textContent("#source"), /saved report.*NVIDIA H200.*vulkan.*2026-11-24.*commit 548148e.*24 measurements/);
    assert.equal(await page.locator("#results tbody tr").count(), 24);
    assert.equal(await page.locator("#chart svg rect").count(), 24);

    // One line per strategy and depth through the 4 widths, ordered by weight bytes per token.
    const lines = await page.locator("#crossover svg polyline").evaluateAll((ps) =>
      ps.map((p) => ({
        strategy: p.dataset.strategy, series: p.dataset.series,
        xs: p.getAttribute("points").split(" ").map((xy) => Number(xy.split(",")[0])),
      })),
    );
    assert.deepEqual(
      lines.map((l) => `${l.strategy} ${l.series}`).sort(),
      ["fused", "megakernel", "unfused"].flatMap((s) => [`${s} toy L1, 64 tokens`, `${s} toy L4, 64 tokens`]),
    );
    assert.equal(await page.locator("#crossover svg circle.point").count(), 24);
    for (const l of lines) {
      assert.equal(l.xs.length, 4, l.strategy);
      assert.deepEqual([...l.xs].sort((a, b) => a - b), l.xs, `${l.strategy}: left to right`);
    }
    // A dashed line wherever the fastest strategy (end to end) changes between neighbouring sizes.
    const e2e = (r) => r.endToEndTokensPerSecond.median;
    const sizes = [...new Set(saved.report.results.map((r) => r.weightBytesPerToken))].sort((a, b) => a - b);
    const winners = sizes.map((b) =>
      saved.report.results.filter((r) => r.weightBytesPerToken === b).reduce((x, y) => (e2e(x) >= e2e(y) ? x : y)).strategy,
    );
    const changes = winners.filter((w, i) => i > 0 && w !== winners[i - 1]).length;
    assert.ok(changes >= 1, `the H200 toy grid has a crossover: ${winners}`);
    assert.equal(await page.locator("#crossover svg .crossover-line").count(), changes);
    const notes = await page.locator("#crossover-notes li").allTextContents();
    assert.equal(notes.filter((n) => / → .* at ≈ /.test(n)).length, changes, notes.join("\n"));
    assert.ok(notes.some((n) => n.startsWith("megakernel → fused at ≈ ")), notes.join("\n"));
    // Reports from before the planner marked its pick: no rings, "–" in the table.
    assert.equal(await page.locator("#crossover svg circle.auto-pick").count(), 0);
    await screenshot(page, "bench-saved");
    assertNoProblems(problems);

    // Every saved report the page links to is there and is a report.
    const linked = await page.locator('a[href^="?report="]').evaluateAll((links) =>
      Promise.all(
        links.map(async (a) => {
          const url = new URL(new URLSearchParams(new URL(a.href).search).get("report"), location.href);
          const json = await (await fetch(url)).json();
          return { href: a.getAttribute("href"), results: (json.report ?? json).results?.length ?? 0 };
        }),
      ),
    );
    assert.ok(linked.length >= 5, JSON.stringify(linked));
    for (const l of linked) assert.ok(l.results >= 12, `${l.href}: ${l.results} results`);

    // Something that is not a report: a clear message, and the page stays usable.
    const bad = await openPage(browser, `${base}/examples/site/bench.html?report=../../README.md`);
    await expectState(bad.page, "error", 60_000);
    assert.match(await bad.page.textContent("#error"), /Could not show \.\.\/\.\.\/README\.md/);
    assert.equal(await bad.page.isDisabled("#run"), false);
  } finally {
    await browser.close();
  }
});
