// Launches Debian's Chromium through playwright-core (never a downloaded browser), with or
// without WebGPU on SwiftShader (the flags in webdriver.json, shared with wasm-bindgen-test).
// `args` adds flags, e.g. `--js-flags=--expose-gc` for tests that force garbage collection.
// `adapter: "gpu"` (bench/gpu chromium on the GPU machine) asks for the real GPU through Vulkan
// with no display instead of SwiftShader, timestamps unquantized.
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";

const webdriver = JSON.parse(readFileSync(new URL("../../webdriver.json", import.meta.url), "utf8"));
const webgpuArgs = webdriver["goog:chromeOptions"].args.filter((a) => a !== "--headless=new");
const executablePath = process.env.CHROMIUM ?? webdriver["goog:chromeOptions"].binary;

const gpuArgs = [
  ...webgpuArgs.filter((a) => !a.startsWith("--use-webgpu-adapter=")),
  "--use-angle=vulkan",
  "--disable-vulkan-surface",
  // Without it the renderer never gets an adapter ("A valid external Instance reference no
  // longer exists."), though chrome://gpu lists the H200 as available (2026-11-28).
  "--disable-gpu-compositing",
  "--ignore-gpu-blocklist",
  "--enable-dawn-features=allow_unsafe_apis",
  "--disable-dawn-features=timestamp_quantization",
];

export function launch({ webgpu = true, args = [], adapter = "swiftshader" } = {}) {
  const base = !webgpu
    ? ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]
    : adapter === "gpu" ? gpuArgs : webgpuArgs;
  return chromium.launch({ executablePath, headless: true, args: [...base, ...args] });
}
