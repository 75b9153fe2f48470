// A fresh Vite + TypeScript app using fuselm from its npm tarball: load the model served next to
// the page, generate a few tokens, and report them in the DOM for the test (data-state, #result).
import { loadModel, FuselmError } from "fuselm";

const el = (id: string): HTMLElement => document.getElementById(id)!;

async function main(): Promise<void> {
  const params = new URLSearchParams(location.search);
  const model = await loadModel(new URL(params.get("model") ?? "synthetic.gguf", location.href), { nCtx: 64 });
  try {
    el("status").textContent = "generating…";
    const result = await model.generate("Hello", { maxTokens: 8 });
    el("text").textContent = result.text;
    el("result").textContent = JSON.stringify({
      text: result.text,
      tokens: result.tokens,
      stopReason: result.stopReason,
      wasmUrl: performance.getEntriesByType("resource").map((e) => e.name).find((n) => n.endsWith(".wasm")),
    });
  } finally {
    model.free();
  }
}

main().then(
  () => {
    el("status").textContent = "done";
    document.body.dataset.state = "done";
  },
  (e: unknown) => {
    el("error").textContent = e instanceof FuselmError ? `${e.kind}: ${e.message}` : String(e);
    document.body.dataset.state = "error";
  },
);
