// A fresh Vite + TypeScript app using fuselm from its npm tarball: load the model served next to
// the page, on the main thread and then in fuselm's module worker (which Vite must bundle), stream
// a few tokens each time, and report them in the DOM for the test (data-state, #result).
import { loadModel, FuselmError, type LoadPhase } from "fuselm";

const el = (id: string): HTMLElement => document.getElementById(id)!;

async function run(worker: boolean) {
  const params = new URLSearchParams(location.search);
  const phases: LoadPhase[] = [];
  const model = await loadModel(new URL(params.get("model") ?? "synthetic.gguf", location.href), {
    nCtx: 64,
    worker,
    onProgress: (p) => {
      if (phases.at(-1) !== p.phase) phases.push(p.phase);
      el("status").textContent = `${p.phase} ${p.loadedBytes}/${p.totalBytes ?? "?"} bytes`;
    },
  });
  try {
    el("status").textContent = "generating…";
    const generation = model.generate("Hello", { maxTokens: 8 });
    let streamedText = "";
    const streamedIds: number[] = [];
    for await (const chunk of generation) {
      streamedText += chunk.text;
      streamedIds.push(...chunk.tokenIds);
      el("text").textContent = streamedText;
    }
    const result = await generation.result();
    return { text: result.text, tokens: result.tokens, stopReason: result.stopReason, streamedText, streamedIds, phases };
  } finally {
    await model.dispose();
  }
}

async function main(): Promise<void> {
  const main = await run(false);
  const worker = await run(true);
  el("result").textContent = JSON.stringify({ main, worker });
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
