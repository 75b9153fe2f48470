// Tint's output for the fused kernels: loads the package through Dawn in Node with the
// `dump_shaders` toggle (Dawn logs each shader's WGSL and the SPIR-V it generates) and generates
// a few fused tokens, so every fused pipeline is compiled once. Dawn's log goes to stdout/stderr.
// Usage: node bench/dawn-dump-shaders.mjs DAWN_DIR DIST MODEL
import { openAsBlob } from "node:fs";
import { loadFuselm } from "./dawn-env.mjs";

const [dawnDir, distDir, modelPath] = process.argv.slice(2);
const fuselm = await loadFuselm(dawnDir, distDir, [
  "enable-dawn-features=dump_shaders,disable_symbol_renaming",
]);
const model = await fuselm.loadModel(await openAsBlob(modelPath), { nCtx: 64 });
const text = await model.generate("Hello", { maxTokens: 4, strategy: "fused" }).text();
console.log(`generated: ${JSON.stringify(text)}`);
await model.dispose();
