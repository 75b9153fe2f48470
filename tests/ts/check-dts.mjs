// Compares the package's public TypeScript surface (every dist/*.d.ts + dist/wasm/fuselm.d.ts)
// with the committed snapshot tests/ts/api.d.ts.snapshot. Declarations are compared as a sorted
// set, because tsify's emission order is not part of the API. Run with UPDATE_SNAPSHOT=1 after an
// intended API change and review the diff.
import { readFileSync, readdirSync, writeFileSync } from "node:fs";

const read = (p) => readFileSync(new URL(`../../${p}`, import.meta.url), "utf8");
const snapshotUrl = new URL("./api.d.ts.snapshot", import.meta.url);

function blocks(source) {
  // Split into top-level declarations (each starts at column 0 with an optional doc comment).
  const out = [];
  let current = [];
  for (const line of source.split("\n")) {
    if (/^(\/\*\*|export |declare |import )/.test(line) && current.some((l) => !/^\s*(\*|\/\*\*)/.test(l) && l.trim() !== "")) {
      out.push(current.join("\n").trim());
      current = [];
    }
    current.push(line);
  }
  out.push(current.join("\n").trim());
  return out.filter((b) => b && !b.startsWith("/* tslint") && !b.startsWith("/* eslint"));
}

const files = [
  ...readdirSync(new URL("../../dist/", import.meta.url))
    .filter((f) => f.endsWith(".d.ts"))
    .sort()
    .map((f) => `dist/${f}`),
  "dist/wasm/fuselm.d.ts",
];
// wasm-bindgen names closure shims by a hash of the code; those internals are not API.
const normalize = (text) => text.replace(/(__invoke__)h[0-9a-f]{16}(_\d+)?/g, "$1<hash>");
const surface = files.flatMap((f) => [`// ${f}`, ...blocks(normalize(read(f))).sort()]).join("\n\n") + "\n";

if (process.env.UPDATE_SNAPSHOT) {
  writeFileSync(snapshotUrl, surface);
  console.log("check-dts: snapshot updated");
} else {
  const expected = readFileSync(snapshotUrl, "utf8");
  if (expected !== surface) {
    const a = expected.split("\n"), b = surface.split("\n");
    const first = a.findIndex((l, i) => l !== b[i]);
    console.error(`check-dts: public .d.ts differs from tests/ts/api.d.ts.snapshot at line ${first + 1}:`);
    console.error(`  snapshot: ${a[first]}\n  built:    ${b[first]}`);
    console.error("If the change is intended, run UPDATE_SNAPSHOT=1 node tests/ts/check-dts.mjs and review.");
    process.exit(1);
  }
  console.log("check-dts: public .d.ts matches the snapshot");
}
