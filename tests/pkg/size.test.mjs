// The gzipped size of the shipped wasm (dist/wasm/fuselm_bg.wasm) against the size README.md
// states, so that growth is noticed and explained rather than shipped silently.
//
// How the README is read (keep the README sentence in this form):
//   In the "## Bundle size" section, the first `**<raw> MB, <gzip> KB gzipped**` is the baseline,
//   e.g. "today **1.28 MB, 484 KB gzipped**". KB and MB are decimal (1 KB = 1000 bytes), as
//   `gzip -9 -c fuselm_bg.wasm | wc -c` (what scripts/build-npm prints) rounds to them.
// The test fails when `gzip -9` of the built wasm is more than 20% above the stated gzip size.
// That is the "unless the README explains why" rule: when the wasm grows on purpose, update the
// stated number in the README and say there, next to it, what it was before and why it grew
// (the paragraph already keeps that history). A wasm far below the stated size only prints a note.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { root } from "./common.mjs";

const TOLERANCE = 1.2;

/** The baseline from README.md: { raw, gzip } in bytes, and the matched text. */
export function statedSize(readme) {
  const section = readme.split(/^## /m).find((s) => s.startsWith("Bundle size"));
  assert.ok(section, 'README.md has no "## Bundle size" section');
  const m = section.match(/\*\*([\d.]+) MB, ([\d.]+) KB gzipped\*\*/);
  assert.ok(m, 'README.md\'s "Bundle size" section states no "**<raw> MB, <gzip> KB gzipped**"');
  return { raw: Number(m[1]) * 1e6, gzip: Number(m[2]) * 1e3, text: m[0] };
}

test("the gzipped wasm is within 20% of the size README.md states", () => {
  const wasm = join(root, "dist/wasm/fuselm_bg.wasm");
  const raw = statSync(wasm).size;
  const gzip = execFileSync("gzip", ["-9", "-c", wasm], { maxBuffer: 256 * 2 ** 20 }).length;
  const stated = statedSize(readFileSync(join(root, "README.md"), "utf8"));
  const ratio = gzip / stated.gzip;
  console.log(
    `wasm: ${raw} bytes, ${gzip} gzipped (-9); README states ${stated.text} ` +
      `(gzip ${(100 * (ratio - 1)).toFixed(1)}% off)`,
  );
  if (ratio < 1 / TOLERANCE) console.log("note: the wasm is much smaller than README.md says; update the README's number");
  assert.ok(
    ratio <= TOLERANCE,
    `dist/wasm/fuselm_bg.wasm is ${gzip} bytes gzipped, ${(100 * (ratio - 1)).toFixed(1)}% above the ` +
      `${stated.gzip} bytes README.md states (limit +${Math.round(100 * (TOLERANCE - 1))}%). If the growth is ` +
      `intended, update "${stated.text}" in README.md's "Bundle size" section and explain the growth there.`,
  );
});
