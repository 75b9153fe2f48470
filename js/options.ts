// Options checked as the caller wrote them, before they reach the wasm module: a wrong type or a
// value out of range is an `invalid-argument` FuselmError that names the option the way it was
// written and the rule ("maxTokens must be an integer in 0..4294967295, got -1"), not a Rust type.
// The wasm side checks again (and checks what depends on the model, such as nCtx).
import type { Strategy } from "./wasm/fuselm.js";
import { FuselmError } from "./errors.js";

/** The rule's text when `v` breaks it, else undefined. */
export type Rule = (v: unknown) => string | undefined;

const U32 = 4294967295;

const integer =
  (min: number, max: number = Number.MAX_SAFE_INTEGER): Rule =>
  (v) =>
    typeof v === "number" && Number.isInteger(v) && v >= min && v <= max
      ? undefined
      : max === Number.MAX_SAFE_INTEGER
        ? `an integer ≥ ${min}`
        : `an integer in ${min}..${max}`;
const number =
  (test: (x: number) => boolean, text: string): Rule =>
  (v) =>
    typeof v === "number" && Number.isFinite(v) && test(v) ? undefined : text;
const boolean: Rule = (v) => (typeof v === "boolean" ? undefined : "a boolean");
const string: Rule = (v) => (typeof v === "string" ? undefined : "a string");
const strings: Rule = (v) => (Array.isArray(v) && v.every((s) => typeof s === "string") ? undefined : "an array of strings");
const object: Rule = (v) => (typeof v === "object" && v !== null && !Array.isArray(v) ? undefined : "an object");
const func: Rule = (v) => (typeof v === "function" ? undefined : "a function");
const oneOf =
  (values: readonly string[]): Rule =>
  (v) =>
    typeof v === "string" && values.includes(v) ? undefined : `one of ${values.map((x) => JSON.stringify(x)).join(", ")}`;

/** Every strategy name (a `Record`, so a strategy added in Rust must be added here). */
const STRATEGY_NAMES: Record<Strategy, true> = { fused: true, unfused: true, megakernel: true, "megakernel-grid": true };
export const STRATEGIES = Object.keys(STRATEGY_NAMES) as Strategy[];

const sampling = {
  temperature: number((x) => x >= 0, "a finite number ≥ 0"),
  topK: integer(0, 128),
  topP: number((x) => x > 0 && x <= 1, "a number in (0, 1]"),
  minP: number((x) => x >= 0 && x <= 1, "a number in [0, 1]"),
  repetitionPenalty: number((x) => x >= 0.001 && x <= 1000, "a number in [0.001, 1000]"),
  frequencyPenalty: number((x) => Math.abs(x) <= 1e6, "a number in [-1e6, 1e6]"),
  presencePenalty: number((x) => Math.abs(x) <= 1e6, "a number in [-1e6, 1e6]"),
  penaltyLastN: integer(0, U32),
  seed: integer(0),
};

/** `generate(prompt, options)`. */
export const GENERATE_RULES: Record<string, Rule> = {
  maxTokens: integer(0, U32),
  chat: boolean,
  system: string,
  strategy: oneOf(STRATEGIES),
  chunkTokens: integer(1, U32),
  stop: strings,
  reusePrefix: boolean,
  contextShift: boolean,
  keepTokens: integer(0, U32),
  responseFormat: object,
  logprobs: boolean,
  topLogprobs: integer(0, 20),
  ...sampling,
};

/** `loadModel(source, options)`. */
export const LOAD_RULES: Record<string, Rule> = {
  nCtx: integer(1, U32),
  maxBatch: integer(1, U32),
  kvF16: boolean,
  strategy: oneOf(STRATEGIES),
  cache: oneOf(["cache-api", "opfs", "none"]),
  worker: boolean,
  onProgress: func,
  memoryBudget: integer(0),
};

/** `estimateMemory(source, options)`. */
export const ESTIMATE_RULES: Record<string, Rule> = {
  nCtx: LOAD_RULES.nCtx!,
  maxBatch: LOAD_RULES.maxBatch!,
  kvF16: boolean,
};

/** `chat.completions.create(request)`, in OpenAI's names. */
export const CHAT_RULES: Record<string, Rule> = {
  stream: boolean,
  max_tokens: integer(0, U32),
  max_completion_tokens: integer(0, U32),
  temperature: sampling.temperature,
  top_p: sampling.topP,
  top_k: sampling.topK,
  min_p: sampling.minP,
  seed: sampling.seed,
  frequency_penalty: sampling.frequencyPenalty,
  presence_penalty: sampling.presencePenalty,
  repetition_penalty: sampling.repetitionPenalty,
  cache_prompt: boolean,
  context_shift: boolean,
  keep_tokens: integer(0, U32),
  strategy: oneOf(STRATEGIES),
  model: string,
  logprobs: boolean,
  top_logprobs: integer(0, 20),
};

/** How a value reads in a message. */
function shown(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint" || v === null) return String(v);
  return Array.isArray(v) ? "an array" : `a ${typeof v}`;
}

/** Throws `invalid-argument` for the first option of `options` that breaks its rule. */
export function checkOptions(options: unknown, rules: Record<string, Rule>, what = "options"): void {
  if (options === undefined || options === null) return;
  if (typeof options !== "object" || Array.isArray(options)) {
    throw new FuselmError("invalid-argument", `${what} must be an object, got ${shown(options)}`);
  }
  for (const [key, rule] of Object.entries(rules)) {
    const v = (options as Record<string, unknown>)[key];
    if (v === undefined) continue;
    const broken = rule(v);
    if (broken !== undefined) throw new FuselmError("invalid-argument", `${key} must be ${broken}, got ${shown(v)}`);
  }
}
