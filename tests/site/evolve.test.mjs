// The evolve page as a person uses it: it evolves a CartPole controller live on the GPU (WebGPU on
// SwiftShader here), draws the fitness curve and the current mean policy's episode, pauses,
// resumes and resets; on a software adapter its defaults are small and learn within seconds; a
// browser without WebGPU gets the typed error; every page's nav links it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { launch } from "./chromium.mjs";
import { assertNoProblems, expectState, openPage, root, screenshot, startServer, waitState } from "./page.mjs";

let server, base;
before(async () => ({ server, base } = await startServer()));
after(() => server?.close());

const evolveState = (page) =>
  page.evaluate(() => {
    const e = window.fuselmEvolve;
    return { state: e.state, running: e.running, generations: e.generations, calls: e.calls, stats: e.stats, framesDrawn: e.framesDrawn, episode: e.episode, info: e.info };
  });

/** Canvas pixels that are drawn (not transparent), and their distinct colours. */
const canvasInk = (page) =>
  page.evaluate(() => {
    const c = document.getElementById("cart");
    const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let ink = 0;
    const colors = new Set();
    for (let i = 0; i < data.length; i += 4) {
      if (data[i + 3] > 0) {
        ink++;
        colors.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
      }
    }
    return { ink: ink / (c.width * c.height), colors: colors.size };
  });

test("the evolve page learns CartPole live, animates the mean policy, pauses, resumes and resets", async () => {
  const browser = await launch();
  try {
    const t0 = performance.now();
    // until=0: no automatic pause; the Pause button stops it.
    const { page, problems } = await openPage(browser, `${base}/examples/site/evolve.html?autorun&population=64&episodeLength=200&generations=5&until=0`);
    await expectState(page, "running", 60_000);
    assert.equal(await page.getAttribute(`header nav a[aria-current="page"]`, "href"), "evolve.html");
    assert.equal(await page.isDisabled("#population"), true, "the compiled settings are fixed while a run exists");
    await page.waitForFunction(() => window.fuselmEvolve.generations >= 30 || window.fuselmEvolve.state === "error", null, { timeout: 60_000, polling: 50 });
    await expectState(page, "running", 1_000);
    const tLearn = performance.now() - t0;
    // The animation runs: frames keep being drawn while evolution goes on.
    const frames0 = (await evolveState(page)).framesDrawn;
    await page.waitForFunction((f) => window.fuselmEvolve.framesDrawn >= f + 10, frames0, { timeout: 10_000 });

    await page.click("#pause");
    await expectState(page, "paused", 30_000);
    const paused = await evolveState(page);
    await page.waitForTimeout(1_500);
    const later = await evolveState(page);
    assert.equal(later.generations, paused.generations, "no generations after Pause");
    assert.equal(later.calls, paused.calls, "no GPU calls after Pause");
    assert.equal(later.running, false);

    // The learning: the population's mean reward rose well above the first generation's.
    const { stats, info } = paused;
    assert.equal(info.population, 64);
    assert.equal(info.episodeLength, 200);
    assert.equal(info.parameters, 4 * 2 + 2, "a linear policy: 4 observations -> 2 actions");
    assert.equal(stats.length, paused.generations);
    assert.equal(stats.length, paused.calls * 5, "5 generations per GPU call");
    assert.ok(stats.length >= 30);
    for (const s of stats) {
      assert.ok(Number.isFinite(s.meanReward) && s.meanReward >= 1 && s.meanReward <= 200, JSON.stringify(s));
      assert.ok(s.bestReward >= s.meanReward && s.bestReward <= 200, JSON.stringify(s));
      assert.ok(Number.isInteger(s.bestMember) && s.bestMember >= 0 && s.bestMember < 64, JSON.stringify(s));
    }
    const first = stats[0].meanReward;
    const last = stats.at(-1).meanReward;
    const at30 = stats[29].meanReward;
    console.log(`# evolve: ${stats.length} generations (30 after ${(tLearn / 1000).toFixed(1)} s incl. page load and compile); mean reward ${first.toFixed(1)} -> ${at30.toFixed(1)} at generation 30 -> ${last.toFixed(1)} at ${stats.length}; ${paused.framesDrawn} frames drawn`);
    assert.ok(at30 >= 2 * first && at30 >= 60, `mean reward ${first} -> ${at30} at generation 30`);
    assert.ok(last >= 2 * first && last >= 60, `mean reward ${first} -> ${last} at generation ${stats.length}`);

    // The page shows those numbers: the stats, one curve point per generation, the episode.
    assert.equal(await page.textContent("#stat-generations"), String(stats.length));
    assert.equal(await page.textContent("#stat-calls"), String(paused.calls));
    assert.equal(await page.textContent("#stat-mean"), last.toLocaleString("en-US", { maximumFractionDigits: 1 }));
    assert.match(await page.textContent("#stat-rate"), /^[\d,.]+$/);
    const per = Math.ceil(stats.length / 600);
    const points = await page.locator("#curve polyline.curve-mean").getAttribute("points");
    assert.equal(points.trim().split(/\s+/).length, Math.ceil(stats.length / per));
    assert.match(await page.textContent("#curve svg"), /generation/);
    assert.match(await page.textContent("#curve svg"), /reward/);
    assert.match(await page.textContent("#status"), new RegExp(`paused after ${stats.length} generations`));
    assert.equal(await page.textContent("#start"), "Resume");
    const episode = paused.episode;
    assert.ok(episode && episode.steps >= 1 && episode.steps <= 200 && episode.reward === episode.steps, JSON.stringify(episode));
    assert.match(await page.textContent("#episode"), /step \d+ of \d+/);
    const ink = await canvasInk(page);
    assert.ok(ink.ink > 0.01 && ink.colors >= 4, `the canvas looks blank: ${JSON.stringify(ink)}`);
    await screenshot(page, "evolve");

    // Resume continues from the current mean; Reset starts over.
    await page.click("#start");
    await page.waitForFunction((g) => window.fuselmEvolve.generations > g, paused.generations, { timeout: 30_000 });
    await page.click("#pause");
    await expectState(page, "paused", 30_000);
    await page.click("#reset");
    await expectState(page, "idle", 30_000);
    const reset = await evolveState(page);
    assert.deepEqual([reset.generations, reset.calls, reset.stats, reset.info], [0, 0, [], undefined]);
    assert.equal(await page.textContent("#stat-generations"), "0");
    assert.equal(await page.isDisabled("#population"), false);
    assert.equal(await page.textContent("#start"), "Start");
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

test("on SwiftShader the defaults are small, learn within seconds and pause at generation 300", async () => {
  const browser = await launch();
  try {
    const t0 = performance.now();
    const { page, problems } = await openPage(browser, `${base}/examples/site/evolve.html`);
    await page.getByText("a CPU adapter").waitFor({ timeout: 60_000 });
    assert.equal(await page.inputValue("#population"), "64");
    assert.equal(await page.inputValue("#episode-length"), "200");
    assert.equal(await page.inputValue("#generations"), "5");
    assert.equal(await page.inputValue("#policy"), "linear");
    assert.equal(await page.inputValue("#until"), "300");
    await page.click("#start");
    await expectState(page, "paused", 60_000);
    const seconds = (performance.now() - t0) / 1000;
    const { stats } = await evolveState(page);
    assert.equal(stats.length, 300, "the run pauses at the generation asked for");
    const tail = stats.slice(-10).reduce((a, s) => a + s.meanReward, 0) / 10;
    console.log(`# evolve defaults: 300 generations in ${seconds.toFixed(1)} s incl. page load; mean reward ${stats[0].meanReward.toFixed(1)} -> ${tail.toFixed(1)} (last 10)`);
    assert.ok(tail >= 150, `the mean reward of the last 10 generations is ${tail} of 200`);
    assert.ok(seconds < 30, `${seconds} s`);
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

test("an MLP policy learns too; with reduced motion the policy is a still", async () => {
  const browser = await launch();
  try {
    const { page, problems } = await openPage(browser);
    await page.emulateMedia({ reducedMotion: "reduce" });
    await page.goto(`${base}/examples/site/evolve.html?autorun&policy=mlp&population=64&episodeLength=200&generations=10&until=100`);
    await expectState(page, "paused", 60_000);
    const { stats, info, framesDrawn } = await evolveState(page);
    assert.equal(info.parameters, 4 * 8 + 8 + 8 * 2 + 2);
    assert.equal(stats.length, 100);
    const first = stats[0].meanReward, last = stats.at(-1).meanReward;
    console.log(`# evolve MLP 8: mean reward ${first.toFixed(1)} -> ${last.toFixed(1)} in 100 generations`);
    assert.ok(last >= 2 * first && last >= 60, `${first} -> ${last}`);
    // prefers-reduced-motion: no animation; one still per GPU call (and the idle picture).
    assert.equal(await page.isChecked("#animate"), false);
    assert.match(await page.textContent("#episode"), /step (\d+) of \1 \(/);
    assert.equal(framesDrawn, 1 + 10);
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

test("without WebGPU the evolve page shows the typed webgpu-unavailable error", async () => {
  const browser = await launch();
  try {
    const { page, problems } = await openPage(browser, `${base}/examples/site/evolve.html?autorun`, {
      init: () => {
        delete Object.getPrototypeOf(navigator).gpu;
      },
    });
    assert.equal(await waitState(page, ["error"], 60_000), "error");
    // The autorun's Start tried createSimulation and got the same typed error.
    await page.waitForFunction(() => document.getElementById("start").disabled === false);
    assert.equal(await page.evaluate(() => document.body.dataset.errorKind), "webgpu-unavailable");
    assert.equal(await page.evaluate(() => window.fuselmEvolve.error?.kind), "webgpu-unavailable");
    assert.match(await page.textContent("#error"), /failed — webgpu-unavailable: \S/);
    await page.click("#start");
    await page.waitForFunction(() => document.body.dataset.state === "error");
    assert.equal(await page.evaluate(() => window.fuselmEvolve.generations), 0);
    assertNoProblems(problems);
  } finally {
    await browser.close();
  }
});

test("every page's nav links the evolve page, and the landing page has its card", async () => {
  const pages = readdirSync(`${root}examples/site`).filter((f) => f.endsWith(".html"));
  assert.ok(pages.includes("evolve.html"));
  for (const file of pages) {
    const html = await (await fetch(`${base}/examples/site/${file}`)).text();
    const nav = html.match(/<nav>([\s\S]*?)<\/nav>/)?.[1];
    assert.ok(nav, `${file} has a nav`);
    assert.match(nav, /<a href="evolve\.html"( aria-current="page")?>Evolve<\/a>/, `${file}'s nav links evolve.html`);
    assert.equal(/aria-current="page">Evolve</.test(nav), file === "evolve.html", `${file}: aria-current`);
  }
  const index = await (await fetch(`${base}/examples/site/`)).text();
  assert.match(index, /<div class="pages">[\s\S]*<a href="evolve\.html"><strong>Evolve →<\/strong>[\s\S]*<\/div>/);
});
