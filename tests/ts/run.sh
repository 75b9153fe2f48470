#!/usr/bin/env bash
# TypeScript tests: the public .d.ts against its snapshot, then a consumer project type-checked
# against the `npm pack` tarball installed as a real dependency (strict, plus the stricter flags in
# consumer/tsconfig.json), which must use every export of the package.
set -euo pipefail
cd "$(dirname "$0")/../.."
node tests/ts/check-dts.mjs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tarball=$(npm pack --silent --pack-destination "$tmp" | tail -n 1)
consumer=tests/ts/consumer
rm -rf "$consumer/node_modules"
(cd "$consumer" && npm install --no-save --no-audit --no-fund --offline "$tmp/$tarball" >/dev/null)
test -f "$consumer/node_modules/fuselm/dist/wasm/fuselm_bg.wasm" || { echo "tarball lacks the wasm module" >&2; exit 1; }
node_modules/.bin/tsc -p "$consumer/tsconfig.json" --noEmit --strict
node tests/ts/check-consumer.mjs
echo "ts: consumer type-checks against $tarball"
