// Launches Debian's Chromium through playwright-core (never a downloaded browser), with or
// without WebGPU on SwiftShader (the flags in webdriver.json, shared with wasm-bindgen-test).
// `args` adds flags, e.g. `--js-flags=--expose-gc` for tests that force garbage collection.
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";

const webdriver = JSON.parse(readFileSync(new URL("../../webdriver.json", import.meta.url), "utf8"));
const webgpuArgs = webdriver["goog:chromeOptions"].args.filter((a) => a !== "--headless=new");
const executablePath = process.env.CHROMIUM ?? webdriver["goog:chromeOptions"].binary;

export function launch({ webgpu = true, args = [] } = {}) {
  const base = webgpu
    ? webgpuArgs
    : ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"];
  return chromium.launch({ executablePath, headless: true, args: [...base, ...args] });
}
