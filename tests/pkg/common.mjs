// Shared by the packaging tests: the packed tarball, installing it into a scratch app, the
// synthetic model, and running a page in headless Chromium (WebGPU on SwiftShader).
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { launch } from "../site/chromium.mjs";

export const root = fileURLToPath(new URL("../../", import.meta.url));
export const bin = (name) => join(root, "node_modules/.bin", name);

/** A scratch directory, removed when the process exits (unless KEEP_PKG_TMP=1). */
export function scratch(prefix) {
  const dir = mkdtempSync(join(tmpdir(), `fuselm-${prefix}-`));
  if (!process.env.KEEP_PKG_TMP) process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The `npm pack` tarball of the current dist/: $FUSELM_TARBALL (set by run.sh) or packed now. */
export function tarball() {
  if (process.env.FUSELM_TARBALL) return process.env.FUSELM_TARBALL;
  if (!existsSync(join(root, "dist/index.js"))) throw new Error("no dist/: run scripts/build-npm first");
  const dir = scratch("pack");
  const name = execFileSync("npm", ["pack", "--silent", "--pack-destination", dir], { cwd: root, encoding: "utf8" })
    .trim().split("\n").pop();
  return join(dir, name);
}

/** `npm install` of the tarball into `dir` (which has a package.json), offline: fuselm has no dependencies. */
export function install(dir, tgz) {
  execFileSync("npm", ["install", "--offline", "--no-save", "--no-audit", "--no-fund", "--loglevel=error", tgz], {
    cwd: dir,
    stdio: ["ignore", "ignore", "inherit"],
  });
}

/**
 * The small synthetic GGUF (target/site-test/synthetic.gguf), written by the native CLI if missing:
 * target/debug/fuselm (what scripts/test builds) else target/release/fuselm. Never runs cargo.
 */
export function syntheticModel() {
  const model = join(root, "target/site-test/synthetic.gguf");
  if (!existsSync(model)) {
    const cli = ["target/debug/fuselm", "target/release/fuselm"].map((p) => join(root, p)).find(existsSync);
    if (!cli) throw new Error("no target/site-test/synthetic.gguf and no fuselm binary to write it: cargo build --bin fuselm");
    mkdirSync(join(root, "target/site-test"), { recursive: true });
    execFileSync(cli, ["synthetic-model", model], { stdio: "inherit" });
  }
  return model;
}

/**
 * Opens `url` in headless Chromium with WebGPU and waits for the page to set
 * `document.body.dataset.state` to "done" or "error". Returns the state, the JSON in `#result`
 * (or the text of `#error`), the page's uncaught errors and every response (url, status).
 */
export async function runPage(url, { timeout = 240_000 } = {}) {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const pageErrors = [];
    const responses = [];
    const consoleLines = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    page.on("console", (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
    page.on("response", (r) => responses.push({ url: r.url(), status: r.status() }));
    await page.goto(url);
    await page.waitForFunction(() => ["done", "error"].includes(document.body.dataset.state ?? ""), null, { timeout });
    const state = await page.evaluate(() => document.body.dataset.state);
    const text = await page.textContent(state === "done" ? "#result" : "#error");
    return { state, result: state === "done" ? JSON.parse(text ?? "null") : undefined, error: state === "error" ? text : undefined, pageErrors, responses, consoleLines };
  } finally {
    await browser.close();
  }
}
