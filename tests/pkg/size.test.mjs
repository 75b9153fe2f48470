// The gzipped size of the shipped wasm (dist/wasm/fuselm_bg.wasm) against the baseline in
// size-baseline.json next to this file, so that growth is noticed and explained rather than
// shipped silently.
//
// size-baseline.json: { gzip_bytes, raw_bytes?, tolerance, measured, note }. Bytes are what
// `gzip -9 -c fuselm_bg.wasm | wc -c` gives (scripts/build-npm prints it). The test fails when
// `gzip -9` of the built wasm is more than `tolerance` (0.2 = 20%) above `gzip_bytes`. When the
// wasm grows on purpose, update the JSON (bytes and `measured`) and say in bench/HISTORY.md
// ("Bundle size") what it was before and why it grew. A wasm far below the baseline only prints
// a note.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { root } from "./common.mjs";

const BASELINE = "tests/pkg/size-baseline.json";

/** The baseline from size-baseline.json, checked: { gzip, raw (or undefined), tolerance, measured }. */
export function baseline(json) {
  const b = JSON.parse(json);
  assert.ok(Number.isInteger(b.gzip_bytes) && b.gzip_bytes > 0, `${BASELINE}: gzip_bytes must be a positive integer`);
  assert.ok(
    b.raw_bytes === undefined || (Number.isInteger(b.raw_bytes) && b.raw_bytes > 0),
    `${BASELINE}: raw_bytes, when given, must be a positive integer`,
  );
  assert.ok(typeof b.tolerance === "number" && b.tolerance > 0 && b.tolerance < 1, `${BASELINE}: tolerance must be in (0, 1)`);
  return { gzip: b.gzip_bytes, raw: b.raw_bytes, tolerance: b.tolerance, measured: String(b.measured ?? "unknown") };
}

test("the gzipped wasm is within its tolerance of the baseline in size-baseline.json", () => {
  const wasm = join(root, "dist/wasm/fuselm_bg.wasm");
  const raw = statSync(wasm).size;
  const gzip = execFileSync("gzip", ["-9", "-c", wasm], { maxBuffer: 256 * 2 ** 20 }).length;
  const stated = baseline(readFileSync(join(root, BASELINE), "utf8"));
  const limit = 1 + stated.tolerance;
  const ratio = gzip / stated.gzip;
  const rawNote = stated.raw === undefined ? "" : `, raw ${raw} vs ${stated.raw}`;
  console.log(
    `wasm: ${raw} bytes, ${gzip} gzipped (-9); baseline ${stated.gzip} gzipped (measured ${stated.measured}) ` +
      `(gzip ${(100 * (ratio - 1)).toFixed(1)}% off${rawNote})`,
  );
  if (ratio < 1 / limit) console.log(`note: the wasm is much smaller than the baseline; update ${BASELINE}`);
  assert.ok(
    ratio <= limit,
    `dist/wasm/fuselm_bg.wasm is ${gzip} bytes gzipped, ${(100 * (ratio - 1)).toFixed(1)}% above the ` +
      `${stated.gzip} bytes of ${BASELINE} (limit +${Math.round(100 * stated.tolerance)}%). If the growth is ` +
      `intended, update ${BASELINE} and explain the growth in bench/HISTORY.md ("Bundle size").`,
  );
});
