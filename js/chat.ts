// `model.chat.completions.create(...)`: the OpenAI chat-completions shape over fused generation.
// Pass the whole conversation each time, as with OpenAI; the KV cache of the prefix it shares
// with the previous request (the earlier turns) is reused, so only the new turn is prefilled
// (`usage.prompt_tokens_details.cached_tokens` says how many prompt tokens were reused).
import type { ChatMessage, GenerateOptions, GenerateResult, JsonSchema, ResponseFormat, Strategy } from "./wasm/fuselm.js";
import type { Generation } from "./generation.js";
import { FuselmError } from "./errors.js";
import { checkOptions, CHAT_RULES } from "./options.js";
import {
  callableTools,
  parseToolCalls,
  templateMessages,
  toolFormat,
  toolInstructions,
  withToolInstructions,
  type ChatCompletionMessage,
  type ChatTool,
  type ChatToolCall,
  type ChatToolChoice,
} from "./tools.js";

export type { ChatMessage, ChatCompletionMessage, ChatTool, ChatToolCall, ChatToolChoice };

export interface ChatCompletionRequest {
  /** The conversation so far: "system", "user" and "assistant" turns, assistant turns that
   * called tools (`tool_calls`) and the tools' results (`role: "tool"`). */
  messages: ChatCompletionMessage[];
  /** Stream chunks (`for await`) instead of returning one completion. */
  stream?: boolean;
  /** Most tokens to generate (default 128). `max_completion_tokens` is accepted too. */
  max_tokens?: number;
  max_completion_tokens?: number;
  /** 0 (the default) is greedy. */
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  /** The same seed gives the same tokens on every strategy and adapter. */
  seed?: number;
  /** Up to 8 stop sequences; never part of the answer, even when split across tokens. */
  stop?: string | string[];
  frequency_penalty?: number;
  presence_penalty?: number;
  repetition_penalty?: number;
  /** Reuse the KV cache of the prefix shared with the previous request (default true). */
  cache_prompt?: boolean;
  /** Past `nCtx`, drop the oldest tokens after the first `keep_tokens` and go on (default
   * true; `usage.extra.dropped_tokens` says how many are out of the context). false: a request
   * that would pass `nCtx` fails with kind "limit-exceeded". */
  context_shift?: boolean;
  /** Tokens a context shift never drops (default: the system message's). */
  keep_tokens?: number;
  /** Aborts the request: the promise or the stream rejects with kind "aborted". */
  signal?: AbortSignal;
  strategy?: Strategy;
  /** Accepted for compatibility and echoed back; the loaded model answers. */
  model?: string;
  /**
   * The answer's format, as OpenAI takes it: `{ type: "json_schema", json_schema: { name,
   * schema } }` (JSON valid under the schema), `{ type: "json_object" }` (any JSON object),
   * `{ type: "grammar", grammar }` (a GBNF grammar, as WebLLM takes one) or `{ type: "text" }`.
   * Every token is chosen among those that keep the answer valid; an answer cut by
   * `max_tokens` has `finish_reason: "length"` and is incomplete.
   */
  response_format?: ChatResponseFormat;
  /**
   * Functions the model may call, on any model: they are described in the system message, and
   * the answer is held on the GPU to a call whose `arguments` follow the function's
   * `parameters` schema (README.md, "Tool calls"). A call comes back in `message.tool_calls`
   * with `finish_reason: "tool_calls"`.
   */
  tools?: ChatTool[];
  /** "auto" (default: a call or words), "none", "required" or a named function. */
  tool_choice?: ChatToolChoice;
  /** Allow several calls in one answer (default true; at most 8). */
  parallel_tool_calls?: boolean;
  /**
   * Report each answer token's log-probability in `choices[0].logprobs.content`: the natural
   * log of its probability under the logits the sampler ranked (penalised, tokens the
   * response format disallows removed) at temperature 1. Fused and unfused strategies. In a
   * stream they come in one chunk after the answer's text.
   */
  logprobs?: boolean;
  /** With `logprobs`: the most likely tokens to report at each step (0–20). */
  top_logprobs?: number;
}

/** One token's log-probability in a chat answer (OpenAI's shape). */
export interface ChatTokenLogprob {
  token: string;
  logprob: number;
  /** The token's bytes (its `token` text is lossy where they are not whole characters). */
  bytes: number[];
  /** The step's most likely tokens, best first. */
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

/** `choices[0].logprobs` (null unless `logprobs` was asked). */
export type ChatLogprobs = { content: ChatTokenLogprob[] } | null;

function chatLogprobs(r: GenerateResult): ChatLogprobs {
  if (r.logprobs === undefined) return null;
  return {
    content: r.logprobs.map((l) => ({
      token: l.token,
      logprob: l.logprob,
      bytes: l.bytes,
      top_logprobs: l.topLogprobs.map((t) => ({ token: t.token, logprob: t.logprob, bytes: t.bytes })),
    })),
  };
}

/** `response_format` of a chat request (OpenAI's shape). */
export type ChatResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "grammar"; grammar: string }
  | { type: "json_schema"; json_schema: { name: string; description?: string; schema?: JsonSchema; strict?: boolean | null } };

/** The generate option for a chat request's `response_format`. */
function responseFormat(f: ChatResponseFormat | undefined): ResponseFormat | undefined {
  if (f === undefined) return undefined;
  if (typeof f !== "object" || f === null) {
    throw new FuselmError("invalid-argument", 'response_format must be { type: "text" | "json_object" | "json_schema" | "grammar", ... }');
  }
  switch (f.type) {
    case "text":
      return { type: "text" };
    case "json_object":
      return { type: "json_object" };
    case "grammar":
      if (typeof f.grammar !== "string") {
        throw new FuselmError("invalid-argument", `response_format.grammar must be a string (GBNF), got ${typeof f.grammar}`);
      }
      return { type: "grammar", grammar: f.grammar };
    case "json_schema": {
      const spec = f.json_schema;
      if (typeof spec !== "object" || spec === null || typeof spec.name !== "string") {
        throw new FuselmError("invalid-argument", "response_format.json_schema must be { name: string, schema?: object, strict?: boolean }");
      }
      // OpenAI: no schema means any JSON value is fine; here an object, as json_object.
      return spec.schema === undefined ? { type: "json_object" } : { type: "json_schema", schema: spec.schema };
    }
    default:
      throw new FuselmError("invalid-argument", `response_format.type must be "text", "json_object", "json_schema" or "grammar", got ${JSON.stringify((f as { type: unknown }).type)}`);
  }
}

export type FinishReason = "stop" | "length" | "tool_calls";

/** The answer: words, or (with `tools`) calls. */
export type ChatCompletionAnswer =
  | { role: "assistant"; content: string; tool_calls?: undefined }
  | { role: "assistant"; content: null; tool_calls: ChatToolCall[] };

/** A call in a stream: the whole call in one chunk, `index` its place in the answer. */
export type ChatToolCallDelta = ChatToolCall & { index: number };

export interface ChatCompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** `cached_tokens`: prompt tokens whose KV cache was kept from the previous request. */
  prompt_tokens_details: { cached_tokens: number };
  /** fuselm's measurements (as WebLLM reports them): seconds from the request to the first
   * generated token on the host, and the prefill and decode rates. */
  extra: {
    time_to_first_token_s: number;
    prefill_tokens_per_s: number;
    decode_tokens_per_s: number;
    /** Tokens of the conversation no longer in the context (dropped by context shifts). */
    dropped_tokens: number;
    /** Oldest messages left out because the conversation's text alone could not fit `nCtx`. */
    dropped_messages: number;
  };
}

export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  /** Unix time in seconds. */
  created: number;
  model: string;
  choices: [{ index: 0; message: ChatCompletionAnswer; finish_reason: FinishReason; logprobs: ChatLogprobs }];
  usage: ChatCompletionUsage;
}

export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: [{ index: 0; delta: { role?: "assistant"; content?: string; tool_calls?: ChatToolCallDelta[] }; finish_reason: FinishReason | null; logprobs: ChatLogprobs }];
  /** On the last chunk only. */
  usage?: ChatCompletionUsage;
}

export interface ChatCompletions {
  create(request: ChatCompletionRequest & { stream: true }): Promise<AsyncIterable<ChatCompletionChunk, void, undefined>>;
  create(request: ChatCompletionRequest & { stream?: false }): Promise<ChatCompletion>;
  create(request: ChatCompletionRequest): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk, void, undefined>>;
}

export interface Chat {
  completions: ChatCompletions;
}

function checkRequest(request: ChatCompletionRequest): void {
  if (typeof request !== "object" || request === null || !Array.isArray(request.messages) || request.messages.length === 0) {
    throw new FuselmError("invalid-argument", "messages must be a non-empty array of { role, content }");
  }
  for (const [i, m] of request.messages.entries()) {
    if (typeof m !== "object" || m === null || typeof m.role !== "string" || m.role === "") {
      throw new FuselmError("invalid-argument", `messages[${i}] must be { role: string, content: string }`);
    }
    if ("tool_calls" in m && m.tool_calls !== undefined) {
      const ok = m.role === "assistant" && Array.isArray(m.tool_calls) && m.tool_calls.every((c) => {
        if (typeof c !== "object" || c === null || typeof c.function?.name !== "string" || typeof c.function.arguments !== "string") return false;
        try {
          JSON.parse(c.function.arguments);
          return true;
        } catch {
          return false;
        }
      });
      if (!ok) throw new FuselmError("invalid-argument", `messages[${i}].tool_calls must be an assistant's [{ id, type: "function", function: { name, arguments: JSON text } }]`);
    } else if (m.role === "tool") {
      if (typeof m.content !== "string" || !("tool_call_id" in m) || typeof m.tool_call_id !== "string") {
        throw new FuselmError("invalid-argument", `messages[${i}] must be { role: "tool", tool_call_id: string, content: string }`);
      }
    } else if (typeof m.content !== "string") {
      throw new FuselmError("invalid-argument", `messages[${i}] must be { role: string, content: string } (roles: "system", "user", "assistant", "tool"; a template may accept more)`);
    }
  }
  checkOptions(request, CHAT_RULES, "request");
  const stop = request.stop;
  if (stop !== undefined && typeof stop !== "string" && !(Array.isArray(stop) && stop.every((s) => typeof s === "string"))) {
    throw new FuselmError("invalid-argument", "stop must be a string or an array of strings");
  }
  if (Array.isArray(stop) && stop.length > 8) throw new FuselmError("invalid-argument", "at most 8 stop sequences");
  if (request.parallel_tool_calls !== undefined && typeof request.parallel_tool_calls !== "boolean") {
    throw new FuselmError("invalid-argument", "parallel_tool_calls must be a boolean");
  }
}

/** The request's settings as generate options. */
export function chatOptions(request: ChatCompletionRequest): GenerateOptions {
  checkRequest(request);
  if (request.tools !== undefined && request.response_format !== undefined && request.response_format.type !== "text" && request.tool_choice !== "none") {
    throw new FuselmError("invalid-argument", "tools and a response_format other than text cannot be combined (tool calls have their own format)");
  }
  const stop = request.stop === undefined ? undefined : typeof request.stop === "string" ? [request.stop] : request.stop;
  return {
    maxTokens: request.max_completion_tokens ?? request.max_tokens,
    temperature: request.temperature,
    topP: request.top_p,
    topK: request.top_k,
    minP: request.min_p,
    seed: request.seed,
    stop,
    frequencyPenalty: request.frequency_penalty,
    presencePenalty: request.presence_penalty,
    repetitionPenalty: request.repetition_penalty,
    reusePrefix: request.cache_prompt ?? true,
    contextShift: request.context_shift,
    keepTokens: request.keep_tokens,
    strategy: request.strategy,
    responseFormat: responseFormat(request.response_format),
    logprobs: request.logprobs,
    topLogprobs: request.top_logprobs,
  };
}

const finishReason = (r: GenerateResult): FinishReason => (r.stopReason === "length" ? "length" : "stop");

const usage = (r: GenerateResult): ChatCompletionUsage => ({
  prompt_tokens: r.promptTokens.length,
  completion_tokens: r.tokens.length,
  total_tokens: r.promptTokens.length + r.tokens.length,
  prompt_tokens_details: { cached_tokens: r.reusedPromptTokens },
  extra: {
    time_to_first_token_s: r.timings.prefillSeconds,
    prefill_tokens_per_s: r.timings.promptTokensPerSecond,
    decode_tokens_per_s: r.timings.decodeTokensPerSecond,
    dropped_tokens: r.droppedTokens,
    dropped_messages: r.droppedMessages,
  },
});

let counter = 0;
const completionId = () => `chatcmpl-fuselm-${Date.now().toString(36)}-${(counter++).toString(36)}`;

/** `chat.completions` over `run(messages, options)`, which starts a generation. */
export function chatCompletions(
  run: (messages: ChatMessage[], options: GenerateOptions, signal: AbortSignal | undefined) => Generation,
  modelName: () => string,
): ChatCompletions {
  async function create(request: ChatCompletionRequest): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk, void, undefined>> {
    const options = chatOptions(request);
    let messages = templateMessages(request.messages);
    const tools = callableTools(request.tools, request.tool_choice);
    if (tools.length > 0) {
      const words = request.tool_choice === undefined || request.tool_choice === "auto";
      const parallel = request.parallel_tool_calls ?? true;
      messages = withToolInstructions(messages, toolInstructions(tools, words, parallel));
      options.responseFormat = toolFormat(tools, words, parallel);
    }
    const generation = run(messages, options, request.signal);
    const id = completionId();
    const created = Math.floor(Date.now() / 1000);
    const model = request.model ?? modelName();
    /** The calls an ended generation made (tools only; not when cut by the length). */
    const callsOf = (r: GenerateResult): ChatToolCall[] | undefined =>
      tools.length > 0 && r.stopReason !== "length" ? parseToolCalls(r.text, tools) : undefined;
    if (!request.stream) {
      const r = await generation.result();
      const calls = callsOf(r);
      const message: ChatCompletionAnswer = calls ? { role: "assistant", content: null, tool_calls: calls } : { role: "assistant", content: r.text };
      return {
        id,
        object: "chat.completion",
        created,
        model,
        choices: [{ index: 0, message, finish_reason: calls ? "tool_calls" : finishReason(r), logprobs: chatLogprobs(r) }],
        usage: usage(r),
      };
    }
    const chunk = (delta: ChatCompletionChunk["choices"][0]["delta"], finish: FinishReason | null, logprobs: ChatLogprobs = null): ChatCompletionChunk => ({
      id,
      object: "chat.completion.chunk",
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: finish, logprobs }],
    });
    async function* chunks(): AsyncGenerator<ChatCompletionChunk, void, undefined> {
      yield chunk({ role: "assistant", content: "" }, null);
      // With tools, text that starts like JSON is held back: a call comes as one tool_calls
      // chunk at the end, never as content.
      let held = tools.length > 0 ? "" : undefined;
      for await (const piece of generation) {
        if (held !== undefined) {
          held += piece.text;
          const start = held.trimStart();
          if (start === "" || start.startsWith("{") || start.startsWith("[")) continue;
          yield chunk({ content: held }, null);
          held = undefined;
        } else if (piece.text !== "") {
          yield chunk({ content: piece.text }, null);
        }
      }
      const r = await generation.result();
      const calls = callsOf(r);
      // The tokens' log-probabilities, once the generation has them all.
      if (request.logprobs === true) yield chunk({}, null, chatLogprobs(r));
      if (calls) {
        yield chunk({ tool_calls: calls.map((c, index) => ({ index, ...c })) }, null);
        yield { ...chunk({}, "tool_calls"), usage: usage(r) };
        return;
      }
      if (held !== undefined && held !== "") yield chunk({ content: held }, null);
      yield { ...chunk({}, finishReason(r)), usage: usage(r) };
    }
    return chunks();
  }
  return { create } as ChatCompletions;
}
