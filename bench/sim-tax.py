"""The browser path's tax: native generations/s over the npm package's (Dawn or Chromium), per
configuration and strategy, from two `sim-bench` JSON files with the same grid.
Usage: python3 bench/sim-tax.py NATIVE.json BROWSER.json"""
import json
import sys

native, browser = (json.load(open(p))["report"]["rows"] for p in sys.argv[1:3])
key = lambda r: (r["env"]["name"], r["population"], r["episodeLength"], r["strategy"])
by = {key(r): r for r in browser}
print("| env | population | steps | strategy | native gens/s | browser gens/s | tax (native / browser) | browser × unfused |")
print("|---|---|---|---|---|---|---|---|")
taxes = []
for r in native:
    b = by.get(key(r))
    if b is None:
        continue
    n, w = r["generationsPerSecond"]["median"], b["generationsPerSecond"]["median"]
    if r["strategy"] == "fused":
        taxes.append(n / w)
    print(f"| {key(r)[0]} | {r['population']} | {r['episodeLength']} | {r['strategy']} | {n:.1f} | {w:.1f} | {n / w:.2f}× | {b['speedupVsUnfused']:.1f} |")
if taxes:
    taxes.sort()
    print(f"\nfused: tax {taxes[0]:.2f}–{taxes[-1]:.2f}× (median {taxes[len(taxes) // 2]:.2f}×) over {len(taxes)} configurations")
