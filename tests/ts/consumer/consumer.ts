// A downstream project's code, type-checked (never run) against the packed npm tarball with the
// strictest settings a consumer may use (tsconfig.json: strict, exactOptionalPropertyTypes,
// noUncheckedIndexedAccess, noUnusedLocals). It imports every export of the package
// (check-consumer.mjs fails when one is missing) and uses each in a meaningful way. Each
// "@ts-expect-error" line fails the check if a type ever degrades to `any`, widens, or loses a field.
import {
  init,
  probe,
  bench,
  loadModel,
  type ProbeCallOptions,
  type ProbeReport,
  estimateMemory,
  memoryInUse,
  type MemoryEstimate,
  type EstimateMemoryOptions,
  deleteCachedModel,
  storeSession,
  readSession,
  deleteSession,
  type SessionInfo,
  type SessionStore,
  type SessionStoreOptions,
  FuselmError,
  Generation,
  type ErrorKind,
  type Model,
  type CalibrateCallOptions,
  type CalibrateOptions,
  type CalibrationStore,
  type Calibration,
  type CalibrationRun,
  type ModelSource,
  type LoadOptions,
  type LoadModelOptions,
  type LoadProgress,
  type LoadPhase,
  type CacheMode,
  type ModelInfo,
  type MemoryUse,
  type QuantUse,
  type GenerateOptions,
  type GenerateCallOptions,
  type ResponseFormat,
  type JsonSchema,
  type JsonValue,
  type SamplingOptions,
  type Strategy,
  type GenerationChunk,
  type GenerateResult,
  type GenerateTimings,
  type PreparedFormat,
  type TokenLogprob,
  type TopLogprob,
  type StopReason,
  type TokenizeOptions,
  type Chat,
  type ChatCompletions,
  type ChatMessage,
  type ChatCompletionRequest,
  type ChatCompletion,
  type ChatCompletionChunk,
  type ChatCompletionUsage,
  type ChatResponseFormat,
  type ChatCompletionAnswer,
  type ChatCompletionMessage,
  type ChatTool,
  type ChatToolCall,
  type ChatToolCallDelta,
  type ChatToolChoice,
  type ChatTokenLogprob,
  type ChatLogprobs,
  type FinishReason,
  type AdapterReport,
  type ProbeOptions,
  type AdapterIdentity,
  type FeatureReport,
  type AdapterLimits,
  type ModelFit,
  type BenchReport,
  type Measurement,
  type TimerKind,
  type GenerationBenchOptions,
  type GenerationBenchReport,
  type GenerationBenchRow,
  type Spread,
  type StepProfile,
  type RoleProfile,
  createSimulation,
  evaluatePopulation,
  simBench,
  type Simulation,
  type PopulationResult,
  type EvolutionResult,
  type Env,
  type CustomEnv,
  type Policy,
  type SimStrategy,
  type SimulationOptions,
  type SimulationInfo,
  type EvaluateOptions,
  type EvolveOptions,
  type EsResult,
  type GenerationStats,
  type EpisodeTrace,
  type Fitness,
  type SimBenchOptions,
  type SimBenchReport,
  type SimBenchRow,
} from "fuselm";

// ---- errors: a closed union of kinds, narrowed exhaustively ----

function describeKind(kind: ErrorKind): string {
  switch (kind) {
    case "webgpu-unavailable": return "no WebGPU in this browser";
    case "no-adapter": return "no GPU adapter";
    case "device-request": return "device refused";
    case "limit-exceeded": return "model too big";
    case "gpu": return "GPU error";
    case "invalid-model": return "not a supported GGUF file";
    case "unsupported-quant": return "weight format not supported";
    case "tokenizer": return "unusable vocabulary";
    case "template": return "chat template failed";
    case "constraint": return "response format not supported";
    case "numerical": return "the model's numbers broke (NaN)";
    case "device-lost": return "the GPU went away";
    case "aborted": return "stopped by the caller";
    case "busy": return "already generating";
    case "network": return "download failed";
    case "cache": return "the download or session could not be stored";
    case "session": return "a saved session for another model, or damaged";
    case "invalid-argument": return "bad argument";
    default: {
      const unreachable: never = kind; // ErrorKind must stay a closed union
      return unreachable;
    }
  }
}

/** What an app shows for a failure: `instanceof` narrows `unknown`, `kind` narrows further. */
export function explain(e: unknown): string {
  if (!(e instanceof FuselmError)) return String(e);
  const name: "FuselmError" = e.name;
  if (e.kind === "limit-exceeded") {
    // limit/needed/available are optional: they must be checked before use.
    // @ts-expect-error needed may be undefined
    const needed: number = e.needed;
    const detail = e.limit !== undefined ? ` (${e.limit}: ${e.needed ?? "?"} > ${e.available ?? "?"})` : "";
    return `${name}: ${describeKind(e.kind)}${detail} ${needed}`;
  }
  // @ts-expect-error "oom" is not an ErrorKind
  if (e.kind === "oom") return "";
  return `${describeKind(e.kind)}: ${e.message}`;
}

// ---- the adapter: probe() and bench() ----

export async function adapter(): Promise<string> {
  await init();
  const options: ProbeOptions = { bench: true, benchBytes: 16 * 2 ** 20, runs: 3 };
  const report: AdapterReport = await probe(options);
  // With a model: its GPU memory from the header, before any download.
  const modelProbe: ProbeCallOptions = { model: "/models/m.gguf", nCtx: 2048, kvF16: true };
  const probed: ProbeReport = await probe(modelProbe);
  const need: number | undefined = probed.memory?.total;
  console.log(need);
  // @ts-expect-error nCtx is a number
  await probe({ model: "/models/m.gguf", nCtx: "2048" });
  const identity: AdapterIdentity = report.adapter;
  const features: FeatureReport = report.features;
  const limits: AdapterLimits = report.limits;
  const defaults: AdapterLimits = report.webgpuDefaults;
  const fit: ModelFit = report.fit;
  const measured: BenchReport | undefined = report.bench;
  const dispatch: Measurement | undefined = measured?.dependentDispatch;
  const timer: TimerKind | undefined = dispatch?.timer;
  const f16: boolean = features.shaderF16 && fit.f16Kernels;
  console.log(identity.architecture, identity.isSoftware, limits.maxStorageBufferBindingSize / defaults.maxStorageBufferBindingSize);
  console.log(f16, fit.maxResidentDimF32, dispatch?.median, timer === "timestamp-query" ? "gpu timer" : "wall clock");

  // @ts-expect-error bench is a boolean
  await probe({ bench: "yes" });
  // @ts-expect-error limits are numbers
  const wrong: string = limits.maxBufferSize;
  // @ts-expect-error no such field
  console.log(limits.maxTextureSize, wrong);
  // @ts-expect-error a closed union
  const badTimer: TimerKind = "performance-now";
  console.log(badTimer);

  const benchOptions: GenerationBenchOptions = { runs: 1, smallToy: true, toyTokens: 16, profile: true, longContext: false, chunkTokens: 8 };
  const toy: GenerationBenchReport = await bench(benchOptions);
  const row: GenerationBenchRow | undefined = toy.results[0];
  const decode: Spread | undefined = row?.decodeTokensPerSecond;
  const speedup: number | undefined = row?.speedupVsUnfused;
  const step: StepProfile | undefined = toy.profile[0];
  const role: RoleProfile | undefined = step?.roles[0];
  console.log(toy.markdown, row?.strategy, decode?.median, speedup, role?.role, role?.microsecondsPerStep);
  const endToEnd: Spread | undefined = row?.endToEndTokensPerSecond;
  const warnings: string[] = toy.plannerWarnings;
  const autoPick: Strategy | undefined = toy.results.find((r) => r.pickedByAuto)?.strategy;
  console.log(endToEnd?.median, warnings.length, toy.notes, autoPick);
  // A model for bench is any loadModel source.
  const withModel: GenerationBenchReport = await bench({ runs: 1 }, new URL("/models/m.gguf", location.href));
  // @ts-expect-error runs is a number
  await bench({ runs: "3" });
  return withModel.notes.join("\n");
}

// ---- loading: every source kind, progress, cache, abort ----

export async function load(file: File, bytes: Uint8Array<ArrayBuffer>, stream: ReadableStream<Uint8Array>): Promise<Model> {
  // The wasm can come from elsewhere than next to the JS (a CDN, bytes).
  await init(new URL("https://cdn.example.com/fuselm_bg.wasm"));
  await init(fetch("/fuselm_bg.wasm"));

  const sources: ModelSource[] = [
    "/models/m.gguf",
    new URL("https://example.com/m.gguf"),
    new Request("/models/m.gguf", { headers: { authorization: "Bearer t" } }),
    await fetch("/models/m.gguf"),
    bytes,
    bytes.buffer,
    new DataView(bytes.buffer),
    file,
    new Blob([bytes]),
    stream,
  ];
  // @ts-expect-error a number is not a model source
  await loadModel(123);

  const phases: Record<LoadPhase, string> = { download: "Downloading", parse: "Checking", upload: "Uploading", compile: "Compiling" };
  const onProgress = (p: LoadProgress): void => {
    // totalBytes is undefined without a content-length: it must be checked.
    // @ts-expect-error totalBytes may be undefined
    const total: number = p.totalBytes;
    const percent = p.totalBytes === undefined ? "" : ` ${Math.round((100 * p.loadedBytes) / p.totalBytes)}%`;
    console.log(`${phases[p.phase]}${percent}${p.fromCache ? " (cached)" : ""}`, total);
    // A cache that could not keep the file is reported, never thrown.
    if (p.cacheError) console.warn(p.cacheError.kind === "cache" ? p.cacheError.message : "unexpected");
  };
  // @ts-expect-error a closed union
  const badPhase: LoadPhase = "verify";
  console.log(badPhase);

  const sizes: LoadOptions = { nCtx: 512, maxBatch: 64, kvF16: true };
  const cache: CacheMode = "undefined" !== typeof caches ? "cache-api" : "opfs";
  const controller = new AbortController();
  const options: LoadModelOptions = { ...sizes, onProgress, cache, signal: controller.signal, strategy: "fused" };
  // @ts-expect-error nCtx is a number
  await loadModel(bytes, { nCtx: true });
  // @ts-expect-error not a cache mode
  await loadModel("/m.gguf", { cache: "indexeddb" });

  // Several models on one device within a budget, checked from the header before downloading.
  const estimateOptions: EstimateMemoryOptions = { nCtx: 4096, kvF16: false, signal: controller.signal };
  const need: MemoryEstimate = await estimateMemory("/models/helper.gguf", estimateOptions);
  const parts: number = need.weights + need.kvCache + need.activations + need.other;
  const fileBytes: number | undefined = need.fileBytes;
  const budget = 2 ** 30;
  if (need.total <= budget - need.inUse && parts <= need.total) {
    const helper = await loadModel("/models/helper.gguf", { nCtx: 4096, memoryBudget: budget });
    const held: number = await memoryInUse();
    console.log(fileBytes, held);
    await helper.dispose();
  }
  // @ts-expect-error memoryBudget is a number of bytes
  await loadModel("/models/helper.gguf", { memoryBudget: "1 GB" });
  // @ts-expect-error estimateMemory takes sizes, not load options like a cache
  await estimateMemory("/models/helper.gguf", { cache: "opfs" });
  for (const source of sources.slice(1)) await (await loadModel(source)).dispose();
  // Worker mode: the same Model API, run in fuselm's module worker (or a copy of it elsewhere).
  const inWorker: Model = await loadModel(bytes, { ...sizes, worker: true, onProgress });
  await inWorker.dispose();
  await (await loadModel(file, { worker: { url: new URL("/static/fuselm-worker.js", location.href) } })).dispose();
  // @ts-expect-error worker is a boolean or { url }
  await loadModel(file, { worker: "yes" });
  try {
    return await loadModel(sources[0] ?? "/models/m.gguf", options);
  } catch (e) {
    if (e instanceof FuselmError && e.kind === "aborted") console.log("load cancelled");
    await deleteCachedModel("/models/m.gguf", cache);
    await deleteCachedModel("/models/m.gguf"); // both stores
    throw e;
  }
}

// ---- the model: info, tokenizer, generation, dispose ----

export function describe(model: Model): string {
  const info: ModelInfo = model.info;
  const memory: MemoryUse = info.memory;
  const megakernelBytes: number = memory.megakernel + memory.other;
  const strategies: Strategy[] = ["fused", "unfused", "megakernel"];
  console.log(megakernelBytes, strategies);
  const quants: QuantUse[] = info.quantTypes;
  const strategy: Strategy = info.strategy;
  const n: number = info.nCtx + info.layers + info.vocabSize + info.kvHeads + info.headDim;
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
  const formats = quants.map((q) => `${q.ggmlType} x${q.matrices} (${mib(q.bytes)})`).join(", ");
  // @ts-expect-error info is a property, not a method
  model.info();
  return `${info.architecture} ${n} ${formats}; GPU ${mib(memory.total)} (weights ${mib(memory.weights)}, KV ${mib(memory.kvCache)}, ` +
    `activations ${mib(memory.activations)}); ${strategy}: ${info.strategyReason} ${info.chatTemplate} ${info.adapter}`;
}

/** A chat that survives reloads: the session restored from OPFS, saved after each turn. */
export async function resumed(model: Model, name: string): Promise<number> {
  const where: SessionStore = "opfs";
  const options: SessionStoreOptions = { store: where };
  const saved: Uint8Array | undefined = await readSession(name, options);
  let restored = 0;
  if (saved !== undefined) {
    const info: SessionInfo = await model.loadSession(saved);
    restored = info.tokens + info.bytes * 0;
  }
  await model.chat.completions.create({ messages: [{ role: "user", content: "Hi" }] });
  const bytes: Uint8Array = await model.saveSession();
  await storeSession(name, bytes, { store: "cache-api" });
  await model.loadSession(bytes.buffer as ArrayBuffer);
  await deleteSession(name);
  // @ts-expect-error a session is bytes, not text
  await model.loadSession("session");
  // @ts-expect-error the stores are "opfs" and "cache-api"
  await storeSession(name, bytes, { store: "localStorage" });
  // @ts-expect-error readSession may find nothing
  const surely: Uint8Array = await readSession(name);
  console.log(surely);
  return restored;
}

export async function calibrated(model: Model): Promise<Strategy> {
  const store: CalibrationStore = { getItem: () => null, setItem: () => {} };
  const settings: CalibrateOptions = { tokens: 16, runs: 3 };
  const options: CalibrateCallOptions = { ...settings, cache: true };
  const c: Calibration = await model.calibrate(options);
  const own: Calibration = await model.calibrate({ cache: store });
  const runs: CalibrationRun[] = c.results;
  const first: number | undefined = runs[0]?.endToEndTokensPerSecond.median;
  const cached: boolean | undefined = c.fromCache;
  const why: string = c.reason;
  const skipped: string[] = c.skipped;
  const key: string = c.key;
  await model.useCalibration(JSON.parse(JSON.stringify(own)) as Calibration);
  console.log(first, cached, why, skipped, key, c.promptTokens, c.newTokens, c.runs);
  // @ts-expect-error a cache is a boolean or a store
  await model.calibrate({ cache: "yes" });
  // @ts-expect-error a calibration is the object calibrate() returns
  await model.useCalibration("fused");
  return c.strategy;
}

export async function tokens(model: Model): Promise<string> {
  const options: TokenizeOptions = { addSpecial: true, parseSpecial: false };
  const ids: number[] = await model.tokenize("<|im_start|>Hello", options);
  const again: string = await model.detokenize(ids);
  const fromTyped: string = await model.detokenize(Uint32Array.from(ids));
  // @ts-expect-error addSpecial is a boolean
  await model.tokenize("Hi", { addSpecial: "yes" });
  // @ts-expect-error ids are numbers
  await model.detokenize(["1"]);
  return again + fromTyped;
}

export async function prepare(model: Model): Promise<number> {
  const format: ResponseFormat = { type: "json_schema", schema: { type: "object", properties: { a: { type: "integer" } } } };
  const prepared: PreparedFormat = await model.prepareResponseFormat(format);
  const parts: [number, boolean, number, number, number] = [
    prepared.compileSeconds, prepared.cached, prepared.states, prepared.masks, prepared.tableBytes,
  ];
  // @ts-expect-error a format is an object with a type
  await model.prepareResponseFormat("json");
  return parts[0];
}

export async function generate(model: Model, onText: (text: string) => void): Promise<GenerateResult> {
  // Streaming: a Generation is an async iterable of chunks.
  const generation: Generation = model.generate("Once upon a time", { maxTokens: 32, stop: ["\n\n"] });
  const ids: number[] = [];
  for await (const chunk of generation) {
    const piece: GenerationChunk = chunk;
    onText(piece.text);
    ids.push(...piece.tokenIds);
  }
  const result: GenerateResult = await generation.result();
  const stop: StopReason = result.stopReason;
  const timings: GenerateTimings = result.timings;
  console.log(ids.length === result.tokens.length, result.promptTokens.length, result.reusedPromptTokens, stop);
  console.log(timings.prefillSeconds + timings.decodeSeconds, timings.promptTokensPerSecond, timings.decodeTokensPerSecond, timings.constraintSeconds);

  // The whole text at once; chat formatting with a system prompt.
  const text: string = await model.generate("Hello", { chat: true, system: "Be brief.", maxTokens: 16 }).text();

  // Sampling presets compose with the other options; a strategy picked at run time.
  const preset: SamplingOptions = {
    temperature: 0.7, topK: 40, topP: 0.95, minP: 0.05,
    repetitionPenalty: 1.1, frequencyPenalty: 0.1, presencePenalty: 0.1, penaltyLastN: 64, seed: 42,
  };
  const strategy: Strategy = Math.random() < 0.5 ? "fused" : "unfused";
  const settings: GenerateOptions = { ...preset, strategy, chunkTokens: 8, maxTokens: 32, reusePrefix: true };
  const controller = new AbortController();
  const call: GenerateCallOptions = { ...settings, signal: controller.signal };
  setTimeout(() => controller.abort(), 1000);
  try {
    await model.generate("Hi", call).text();
  } catch (e) {
    if (!(e instanceof FuselmError && e.kind === "aborted")) throw e;
  }
  const running = model.generate("Hi");
  running.abort();
  await running.result().catch((e: unknown) => console.log(explain(e)));

  // Structured output: JSON valid under a schema, decided token by token on the GPU.
  const schema: JsonSchema = {
    type: "object",
    properties: { name: { type: "string", maxLength: 20 }, age: { type: "integer", minimum: 0 } },
    required: ["name", "age"],
    additionalProperties: false,
  };
  const format: ResponseFormat = { type: "json_schema", schema, maxDepth: 4 };
  const extracted = await model.generate("Ada, 36.", { chat: true, responseFormat: format }).result();
  if (extracted.stopReason !== "length") {
    const value: JsonValue = JSON.parse(extracted.text) as JsonValue;
    console.log(value);
  }
  await model.generate("Pick a code.", { responseFormat: { type: "regex", pattern: "[A-Z]{3}-\\d{3}" } }).text();
  // @ts-expect-error a regex format needs its pattern
  model.generate("Hi", { responseFormat: { type: "regex" } });
  // @ts-expect-error "yaml" is not a response format
  model.generate("Hi", { responseFormat: { type: "yaml" } });

  // @ts-expect-error generate returns a Generation at once, not a promise of the result
  const notAResult: GenerateResult = await model.generate("Hi");
  // @ts-expect-error the prompt is a string
  model.generate(42);
  // @ts-expect-error maxTokens is a number
  model.generate("Hi", { maxTokens: "16" });
  // @ts-expect-error seed is a number
  model.generate("Hi", { seed: "7" });
  // @ts-expect-error temperature is a number
  const badPreset: SamplingOptions = { temperature: "hot" };
  // @ts-expect-error stepsPerSubmit was replaced by chunkTokens
  model.generate("Hi", { stepsPerSubmit: 8 });
  // @ts-expect-error strategy is a closed union
  model.generate("Hi", { strategy: "turbo" });
  // @ts-expect-error stop is a list of strings
  model.generate("Hi", { stop: "\n" });
  // @ts-expect-error text is a string
  const wrong: number = result.text;
  // @ts-expect-error stopReason is a closed union
  const never: StopReason = "timeout";
  // @ts-expect-error chunks have no logits
  for await (const chunk of model.generate("Hi")) console.log(chunk.logits);
  console.log(text, notAResult, badPreset, wrong, never);
  return result;
}

// ---- OpenAI-shaped chat ----

export async function chat(model: Model, print: (s: string) => void): Promise<ChatCompletion> {
  const chat: Chat = model.chat;
  const completions: ChatCompletions = chat.completions;
  const messages: ChatMessage[] = [
    { role: "system", content: "You are terse." },
    { role: "user", content: "Name a colour." },
  ];

  // Non-streaming: one completion.
  const completion: ChatCompletion = await completions.create({ messages, max_tokens: 16, temperature: 0 });
  const [choice] = completion.choices;
  // Without tools the answer is words; with them it may be calls instead (content null).
  const answer: string = choice.message.content ?? "";
  const finish: FinishReason = choice.finish_reason;
  const usage: ChatCompletionUsage = completion.usage;
  const jsonAnswer: ChatResponseFormat = { type: "json_schema", json_schema: { name: "colour", schema: { enum: ["red", "blue"] }, strict: true } };
  const picked = await completions.create({ messages, max_tokens: 8, response_format: jsonAnswer });
  console.log(picked.choices[0].message.content);
  await completions.create({ messages, response_format: { type: "json_object" } });
  console.log(completion.id, completion.object, completion.created, completion.model, finish, usage.total_tokens);
  messages.push({ role: "assistant", content: answer }, { role: "user", content: "Another." });

  // Streaming, multi-turn (the shared prefix's KV cache is reused: cached_tokens).
  const controller = new AbortController();
  const stream = await completions.create({
    messages, stream: true, max_tokens: 16, seed: 7, top_p: 0.9, top_k: 40, min_p: 0.05, stop: ["."],
    frequency_penalty: 0, presence_penalty: 0, repetition_penalty: 1, signal: controller.signal,
    strategy: "unfused", model: "smollm2",
  });
  let last: ChatCompletionChunk | undefined;
  for await (const chunk of stream) {
    const [delta] = chunk.choices;
    // The delta's content is optional (the first chunk carries the role).
    // @ts-expect-error content may be undefined
    const piece: string = delta.delta.content;
    print(delta.delta.content ?? "");
    const reason: FinishReason | null = delta.finish_reason;
    if (reason !== null) last = chunk;
    console.log(piece);
  }
  const cached: number | undefined = last?.usage?.prompt_tokens_details.cached_tokens;
  console.log(cached);

  // A request whose `stream` is not known statically gives either shape.
  const request: ChatCompletionRequest = { messages, stream: Math.random() < 0.5, stop: "\n" };
  const either = await completions.create(request);
  if (Symbol.asyncIterator in either) {
    for await (const chunk of either) print(chunk.choices[0].delta.content ?? "");
  } else {
    print(either.choices[0].message.content ?? "");
  }

  // Tool calls: described to the model, held to the parameters' schema on the GPU.
  const weather: ChatTool = {
    type: "function",
    function: { name: "get_weather", description: "Weather in a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
  };
  const choiceOfTool: ChatToolChoice = Math.random() < 0.5 ? "auto" : { type: "function", function: { name: "get_weather" } };
  const called = await completions.create({ messages, tools: [weather], tool_choice: choiceOfTool, parallel_tool_calls: false });
  const reply: ChatCompletionAnswer = called.choices[0].message;
  const calls: ChatToolCall[] = reply.tool_calls ?? [];
  const [first] = calls;
  if (first) {
    const { city } = JSON.parse(first.function.arguments) as { city: string };
    const turns: ChatCompletionMessage[] = [...messages, reply, { role: "tool", tool_call_id: first.id, content: `sunny in ${city}` }];
    const streamed = await completions.create({ messages: turns, tools: [weather], stream: true });
    for await (const chunk of streamed) {
      const deltas: ChatToolCallDelta[] = chunk.choices[0].delta.tool_calls ?? [];
      for (const d of deltas) print(`${d.index}: ${d.function.name}(${d.function.arguments})`);
    }
  } else if (reply.content !== null) {
    print(reply.content);
  }
  // @ts-expect-error tool_choice is a string or a named function
  completions.create({ messages, tools: [weather], tool_choice: "get_weather" });

  // @ts-expect-error a stream is not a completion
  const notCompletion: ChatCompletion = await completions.create({ messages, stream: true });
  // @ts-expect-error a completion is not iterable
  for await (const chunk of await completions.create({ messages })) console.log(chunk);
  // @ts-expect-error finish_reason is a closed union
  const badFinish: FinishReason = "timeout";
  // @ts-expect-error messages are required
  await completions.create({ max_tokens: 4 });
  // @ts-expect-error max_tokens is a number
  await completions.create({ messages, max_tokens: "4" });
  console.log(notCompletion, badFinish);
  return completion;
}

export async function main(url: string, bytes: Uint8Array<ArrayBuffer>): Promise<void> {
  console.log(await adapter());
  const model: Model = await load(new File([bytes], "m.gguf"), bytes, new Blob([bytes]).stream());
  try {
    console.log(describe(model), await tokens(model), url);
    await generate(model, (t) => console.log(t));
    await chat(model, (t) => console.log(t));
  } catch (e) {
    console.error(explain(e));
  } finally {
    await model.dispose();
  }
  // @ts-expect-error free() was replaced by dispose()
  model.free();
}

// ---- simulation: typed environments, typed arrays out, evolution, the benchmark ----

const pointMass: CustomEnv = {
  wgsl: "fn env_init(seed: u32, member: u32) -> array<f32, STATE_LEN> { ... }",
  stateSize: 2,
  observations: 2,
};

export async function simulate(): Promise<EvolutionResult> {
  const envs: Env[] = [{ name: "cart-pole" }, { name: "rastrigin", dim: 10 }, { name: "custom", ...pointMass }];
  const policy: Policy = { kind: "mlp", hidden: 16 };
  const recurrent: Policy = { kind: "recurrent", hidden: 8 };
  const options: SimulationOptions = { env: envs[0] ?? { name: "pendulum" }, policy, population: 1000, episodeLength: 500 };
  const sim: Simulation = await createSimulation(options);
  const info: SimulationInfo = sim.info;
  const params = new Float32Array(info.population * info.parameters);
  const how: EvaluateOptions = { strategy: "unfused", seed: 3 };
  const result: PopulationResult = await sim.evaluate(params, how);
  const rewards: Float32Array = result.totalReward;
  const steps: Uint32Array = result.steps;
  const strategy: SimStrategy = result.strategy;
  const evolve: EvolveOptions = { generations: 10, sigma: 0.1, learningRate: 0.03, seed: 1 };
  const evolved: EvolutionResult = await sim.evolve(new Float32Array(info.parameters), evolve);
  const stats: GenerationStats[] = evolved.stats;
  const raw: EsResult["stats"] = stats;
  const trace: EpisodeTrace = sim.trace(evolved.theta, { member: 0 });
  const fitness: Fitness = trace.fitness;
  const once: PopulationResult = await evaluatePopulation({ ...options, params, strategy: "fused" });
  const benchOptions: SimBenchOptions = { populations: [1000], episodeLengths: [200], runs: 3 };
  const report: SimBenchReport = await simBench(benchOptions);
  const rows: SimBenchRow[] = report.rows;
  console.log(recurrent, rewards, steps, strategy, raw, fitness.totalReward, trace.states.length, once.elapsedMs, rows, envs);
  sim.free();
  // @ts-expect-error strategies are a closed union
  await sim.evaluate(params, { strategy: "megakernel" });
  // @ts-expect-error an MLP needs its hidden size
  const badPolicy: Policy = { kind: "mlp" };
  // @ts-expect-error environments are a closed union
  const badEnv: Env = { name: "pong" };
  // @ts-expect-error a custom environment needs its WGSL
  const noWgsl: Env = { name: "custom", stateSize: 2, observations: 2 };
  // @ts-expect-error generations are required
  await sim.evolve(params, { sigma: 0.1 });
  console.log(badPolicy, badEnv, noWgsl);
  return evolved;
}

/** Log-probabilities: typed per token, in `generate` and in OpenAI's chat shape. */
export async function logprobs(model: Model): Promise<number> {
  const r: GenerateResult = await model.generate("Hi", { maxTokens: 2, logprobs: true, topLogprobs: 3 }).result();
  const entries: TokenLogprob[] = r.logprobs ?? [];
  const alternatives: TopLogprob[] = entries.flatMap((t) => t.topLogprobs);
  // @ts-expect-error logprobs is absent unless asked
  const always: TokenLogprob[] = r.logprobs;
  const c: ChatCompletion = await model.chat.completions.create({ messages: [{ role: "user", content: "Hi" }], logprobs: true, top_logprobs: 2 });
  const lp: ChatLogprobs = c.choices[0].logprobs;
  const content: ChatTokenLogprob[] = lp?.content ?? [];
  console.log(always, alternatives.map((a) => a.bytes.length));
  return entries.reduce((sum, t) => sum + t.logprob, 0) + content.reduce((sum, t) => sum + Math.exp(t.logprob), 0);
}
