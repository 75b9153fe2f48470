#!/usr/bin/env bash
# Packaging tests of the npm package (issue 8), on the built dist/ (scripts/build-npm first):
#   - size.test.mjs     gzip -9 of dist/wasm/fuselm_bg.wasm within the tolerance (20%) of the
#                       baseline in tests/pkg/size-baseline.json
#   - dts-any.test.mjs  no `any` in the shipped .d.ts (outside wasm-bindgen's raw ABI), none
#                       reachable from dist/index.d.ts
#   - browser.test.mjs  the `npm pack` tarball installed into a fresh Vite + TypeScript app
#                       (vite-app/, built with the repository's vite) and into a plain static page
#                       (static-page/), each generating from the synthetic model in headless Chromium
# The strict consumer type-check of every public type runs in tests/ts/run.sh.
# KEEP_PKG_TMP=1 keeps the scratch apps (printed paths under $TMPDIR).
set -euo pipefail
cd "$(dirname "$0")/../.."
test -f dist/index.js || { echo "pkg: no dist/: run scripts/build-npm first" >&2; exit 1; }
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tarball=$(npm pack --silent --pack-destination "$tmp" | tail -n 1)
export FUSELM_TARBALL="$tmp/$tarball"
# Cheapest first (one node --test run would start with browser.test.mjs).
node --test tests/pkg/size.test.mjs tests/pkg/dts-any.test.mjs
node --test tests/pkg/browser.test.mjs
