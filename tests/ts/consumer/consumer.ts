// A downstream project's code, type-checked against the packed npm tarball. The @ts-expect-error
// lines fail the check if a type ever degrades to `any` or loses a field.
import {
  probe,
  bench,
  type GenerationBenchReport,
  type GenerationBenchRow,
  init,
  loadModel,
  Model,
  FuselmError,
  type AdapterReport,
  type ProbeOptions,
  type ErrorKind,
  type Measurement,
  type LoadOptions,
  type GenerateOptions,
  type SamplingOptions,
  type Strategy,
  type GenerateResult,
  type StopReason,
  type ModelInfo,
  type ModelSource,
} from "fuselm";

function describeKind(kind: ErrorKind): string {
  switch (kind) {
    case "webgpu-unavailable": return "no WebGPU in this browser";
    case "no-adapter": return "no GPU adapter";
    case "device-request": return "device refused";
    case "limit-exceeded": return "model too big";
    case "gpu": return "GPU error";
    case "invalid-model": return "not a supported GGUF file";
    case "tokenizer": return "unusable vocabulary";
    case "template": return "chat template failed";
    case "aborted": return "stopped by the caller";
    case "invalid-argument": return "bad argument";
    case "busy": return "already generating";
    default: {
      const unreachable: never = kind; // ErrorKind must stay a closed union
      return unreachable;
    }
  }
}

export async function main(): Promise<void> {
  await init();
  const options: ProbeOptions = { bench: true, benchBytes: 16 * 2 ** 20, runs: 3 };
  try {
    const report: AdapterReport = await probe(options);
    const binding: number = report.limits.maxStorageBufferBindingSize;
    const def: number = report.webgpuDefaults.maxStorageBufferBindingSize;
    const f16: boolean = report.features.shaderF16 && report.fit.f16Kernels;
    const arch: string = report.adapter.architecture;
    const dispatch: Measurement | undefined = report.bench?.dependentDispatch;
    const timer: "timestamp-query" | "wall-clock" | undefined = dispatch?.timer;
    console.log(binding, def, f16, arch, dispatch?.median, timer, report.fit.maxResidentDimF32);

    // @ts-expect-error bench is a boolean
    await probe({ bench: "yes" });
    // @ts-expect-error limits are numbers
    const wrong: string = report.limits.maxBufferSize;
    // @ts-expect-error no such field
    console.log(report.limits.maxTextureSize, wrong);
  } catch (e) {
    if (e instanceof FuselmError) {
      console.log(describeKind(e.kind), e.limit, e.needed, e.available);
    }
  }
}

export async function generateText(url: string, bytes: Uint8Array): Promise<string> {
  const load: LoadOptions = { nCtx: 512, maxBatch: 64 };
  const source: ModelSource = new URL(url);
  const model: Model = await loadModel(source, load);
  const fromBytes: Model = await Model.load(bytes);
  fromBytes.free();
  try {
    const info: ModelInfo = model.info();
    const n: number = info.nCtx + info.layers + info.vocabSize + info.kvHeads;
    const arch: string = info.architecture;
    const options: GenerateOptions = { maxTokens: 16, chat: true, system: "Be brief." };
    const result: GenerateResult = await model.generate("Hello", options);
    const ids: number[] = result.tokens.concat(result.promptTokens);
    const stop: StopReason = result.stopReason;
    const done: boolean = stop === "end-of-generation" || stop === "length" || stop === "aborted";
    const perSecond: number = result.timings.decodeTokensPerSecond;
    console.log(n, arch, ids, done, perSecond);

    // @ts-expect-error the prompt is a string
    await model.generate(42);
    // @ts-expect-error maxTokens is a number
    await model.generate("Hi", { maxTokens: "16" });
    const sampled: GenerateResult = await model.generate("Hi", {
      strategy: "fused",
      chunkTokens: 16,
      temperature: 0.7,
      topK: 40,
      topP: 0.95,
      minP: 0.05,
      repetitionPenalty: 1.1,
      frequencyPenalty: 0.1,
      presencePenalty: 0.1,
      penaltyLastN: 64,
      seed: 42,
    });
    console.log(sampled.tokens.length);
    await model.generate("Hi", { strategy: "unfused" });
    // The exported option types compose: a saved sampling preset, a strategy picked at run time.
    const preset: SamplingOptions = { temperature: 0.8, topK: 40, seed: 7 };
    const strategy: Strategy = Math.random() < 0.5 ? "fused" : "unfused";
    const combined: GenerateOptions = { ...preset, strategy, chunkTokens: 8, maxTokens: 32 };
    await model.generate("Hi", combined);
    // @ts-expect-error seed is a number
    await model.generate("Hi", { seed: "7" });
    // @ts-expect-error temperature is a number
    const badPreset: SamplingOptions = { temperature: "hot" };
    // @ts-expect-error stepsPerSubmit was replaced by chunkTokens
    await model.generate("Hi", { stepsPerSubmit: 8 });
    const report: GenerationBenchReport = await bench({ runs: 1, smallToy: true, profile: false });
    const row: GenerationBenchRow | undefined = report.results[0];
    const speedup: number | undefined = row?.speedupVsUnfused;
    console.log(report.markdown, row?.strategy, row?.decodeTokensPerSecond.median, speedup);
    // @ts-expect-error runs is a number
    await bench({ runs: "3" });
    // @ts-expect-error strategy is a closed union
    await model.generate("Hi", { strategy: "megakernel" });
    // @ts-expect-error topK is a number
    await model.generate("Hi", { topK: "40" });
    // @ts-expect-error text is a string
    const wrong: number = result.text;
    // @ts-expect-error stopReason is a closed union
    const never: StopReason = "timeout";
    // @ts-expect-error nCtx is a load option, a number
    await loadModel(bytes, { nCtx: true });
    // @ts-expect-error a model source is bytes, a Response or a URL
    await loadModel(123);
    // @ts-expect-error Model has a private constructor: use loadModel
    new Model();
    console.log(wrong, never, badPreset);
    return result.text;
  } finally {
    model.free();
  }
}
