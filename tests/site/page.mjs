// Helpers shared by the example-site tests: a server, pages that record every console error and
// uncaught exception / unhandled rejection, waiting for the page's `data-state`, screenshots that
// are checked not to be blank, and the synthetic test model.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { inflateSync } from "node:zlib";
import { serve } from "../../scripts/serve.mjs";
import { writeTinyModel } from "./tiny-model.mjs";

export const root = fileURLToPath(new URL("../../", import.meta.url));
export const syntheticModel = "target/site-test/synthetic.gguf";
export const tinyModel = "target/site-test/tiny.gguf";
export const realModel = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
const screenshots = `${root}target/site-screenshots`;

export async function startServer() {
  const server = await serve(0);
  return { server, base: `http://127.0.0.1:${server.address().port}` };
}

/**
 * The synthetic GGUF (random weights, byte vocabulary, ChatML template): written by the native
 * CLI when missing. Returns its URL path on the test server.
 */
export function ensureSyntheticModel() {
  if (!existsSync(`${root}${syntheticModel}`)) {
    mkdirSync(`${root}target/site-test`, { recursive: true });
    const cli = ["target/debug/fuselm", "target/release/fuselm"].find((p) => existsSync(`${root}${p}`));
    assert.ok(cli, "no target/{debug,release}/fuselm to write the synthetic model with (cargo build first)");
    execFileSync(`${root}${cli}`, ["synthetic-model", syntheticModel], { cwd: root, stdio: "inherit" });
  }
  return `/${syntheticModel}`;
}

/**
 * The tiny model of tiny-model.mjs (1 layer, d_model 64, Q8_0): written every time (it takes
 * milliseconds and keeps the file in step with the writer). Returns its URL path.
 */
export function ensureTinyModel() {
  writeTinyModel(`${root}${tinyModel}`);
  return `/${tinyModel}`;
}

/**
 * A new page that records problems: console messages of type "error" and uncaught exceptions or
 * unhandled promise rejections ("pageerror"). `allow` lists regexps of console errors a test expects.
 */
export async function openPage(browser, url, { init, allow = [], viewport = { width: 1280, height: 900 } } = {}) {
  const page = await browser.newPage({ viewport, acceptDownloads: true });
  const problems = [];
  page.on("console", (m) => {
    if (m.type() === "error" && !allow.some((re) => re.test(m.text()))) problems.push(`console error: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`uncaught: ${e.stack ?? e.message}`));
  if (init) await page.addInitScript(init);
  if (url) await page.goto(url);
  return { page, problems };
}

export function assertNoProblems(problems) {
  assert.deepEqual(problems, [], "the page logged errors or had an uncaught exception / unhandled rejection");
}

/** Waits until `document.body.dataset.state` is one of `states`; returns it. */
export async function waitState(page, states, timeout = 120_000) {
  await page.waitForFunction((s) => s.includes(document.body.dataset.state), states, { timeout, polling: 100 });
  return page.evaluate(() => document.body.dataset.state);
}

/** Waits for `state`; when the page reaches "error" instead, fails with what the page shows. */
export async function expectState(page, state, timeout = 120_000) {
  const got = await waitState(page, [state, "error"], timeout);
  if (got !== state) {
    const shown = await page.evaluate(() => ({
      kind: document.body.dataset.errorKind,
      text: document.querySelector("[role=alert]:not([hidden])")?.textContent ?? document.querySelector("[role=status]")?.textContent,
    }));
    assert.fail(`expected state ${state}, got error ${shown.kind}: ${shown.text}`);
  }
}

// ---------------------------------------------------------------- screenshots

/** Decodes an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium's screenshots are). */
export function decodePng(buf) {
  assert.equal(buf.subarray(0, 8).toString("hex"), "89504e470d0a1a0a", "PNG signature");
  let pos = 8, width, height, depth, colorType, interlace;
  const idat = [];
  while (pos < buf.length) {
    const len = buf.readUInt32BE(pos);
    const type = buf.toString("latin1", pos + 4, pos + 8);
    const data = buf.subarray(pos + 8, pos + 8 + len);
    if (type === "IHDR") {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      [depth, colorType] = [data[8], data[9]];
      interlace = data[12];
    } else if (type === "IDAT") idat.push(data);
    else if (type === "IEND") break;
    pos += 12 + len;
  }
  assert.ok(depth === 8 && (colorType === 2 || colorType === 6) && interlace === 0, `PNG format ${depth}/${colorType}/${interlace}`);
  const bpp = colorType === 6 ? 4 : 3;
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * bpp;
  const pixels = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const out = pixels.subarray(y * stride, (y + 1) * stride);
    const prev = y > 0 ? pixels.subarray((y - 1) * stride, y * stride) : Buffer.alloc(stride);
    for (let i = 0; i < stride; i++) {
      const a = i >= bpp ? out[i - bpp] : 0;
      const b = prev[i];
      const c = i >= bpp ? prev[i - bpp] : 0;
      let p;
      switch (filter) {
        case 0: p = 0; break;
        case 1: p = a; break;
        case 2: p = b; break;
        case 3: p = (a + b) >> 1; break;
        case 4: {
          const q = a + b - c, pa = Math.abs(q - a), pb = Math.abs(q - b), pc = Math.abs(q - c);
          p = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: assert.fail(`PNG filter ${filter}`);
      }
      out[i] = (line[i] + p) & 255;
    }
  }
  return { width, height, bpp, pixels };
}

/** Distinct colours and the share of pixels that differ from the most common (background) colour. */
export function pngStats(buf) {
  const { width, height, bpp, pixels } = decodePng(buf);
  const counts = new Map();
  for (let i = 0; i < pixels.length; i += bpp) {
    const key = (pixels[i] << 16) | (pixels[i + 1] << 8) | pixels[i + 2];
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const background = Math.max(...counts.values());
  return { width, height, colors: counts.size, foreground: 1 - background / (width * height) };
}

/**
 * Saves a full-page screenshot to target/site-screenshots/NAME.png and checks it shows something:
 * a blank page is one colour; a rendered page has text (anti-aliased: many colours) covering a few
 * percent of its pixels.
 */
export async function screenshot(page, name) {
  mkdirSync(screenshots, { recursive: true });
  // A full-page capture of a scrolled page would paint the sticky top bar mid-page.
  await page.evaluate(() => window.scrollTo(0, 0));
  const png = await page.screenshot({ fullPage: true });
  writeFileSync(`${screenshots}/${name}.png`, png);
  const stats = pngStats(png);
  assert.ok(stats.colors >= 32, `${name}.png looks blank: ${stats.colors} colours`);
  assert.ok(stats.foreground >= 0.02, `${name}.png looks blank: ${(stats.foreground * 100).toFixed(2)}% non-background pixels`);
  return stats;
}
