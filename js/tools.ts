// Tool calling for `chat.completions.create({ tools, tool_choice, parallel_tool_calls })`, on any
// model: the tools are described in the system message (the format below), and the answer is
// constrained on the GPU to a call whose arguments follow the function's parameter schema —
// or, with tool_choice "auto", to either such a call or an answer in words.
//
// The format the model is told and held to: one call is the JSON object
//   {"name": "<function name>", "arguments": { ...the function's parameters... }}
// and several calls (parallel_tool_calls, the default) a JSON array of such objects (at most 8).
import type { ChatMessage, JsonSchema, JsonValue, ResponseFormat } from "./wasm/fuselm.js";
import { FuselmError } from "./errors.js";

/** A function the model may call (OpenAI's shape). */
export interface ChatTool {
  type: "function";
  function: {
    name: string;
    description?: string;
    /** A JSON Schema for the arguments object (default: any object). */
    parameters?: JsonSchema;
    /** Accepted for compatibility: arguments always follow `parameters`. */
    strict?: boolean | null;
  };
}

/** "auto" (the model chooses: calls or words; the default with tools), "none" (no call),
 * "required" (at least one call) or one named function. */
export type ChatToolChoice = "auto" | "none" | "required" | { type: "function"; function: { name: string } };

/** A call the model made. `arguments` is JSON text, as OpenAI gives it. */
export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** Most calls in one answer. */
export const MAX_PARALLEL_CALLS = 8;

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Checks `tools` and `choice`; returns the tools the answer may call (none: no constraint). */
export function callableTools(tools: ChatTool[] | undefined, choice: ChatToolChoice | undefined): ChatTool[] {
  if (tools === undefined) {
    if (choice !== undefined && choice !== "none") throw new FuselmError("invalid-argument", "tool_choice needs tools");
    return [];
  }
  if (!Array.isArray(tools) || tools.length === 0) throw new FuselmError("invalid-argument", "tools must be a non-empty array");
  const names = new Set<string>();
  for (const [i, t] of tools.entries()) {
    if (typeof t !== "object" || t === null || t.type !== "function" || typeof t.function !== "object" || t.function === null) {
      throw new FuselmError("invalid-argument", `tools[${i}] must be { type: "function", function: { name, description?, parameters? } }`);
    }
    if (typeof t.function.name !== "string" || !NAME.test(t.function.name)) {
      throw new FuselmError("invalid-argument", `tools[${i}].function.name must be 1-64 letters, digits, _ or -, got ${JSON.stringify(t.function.name)}`);
    }
    if (names.has(t.function.name)) throw new FuselmError("invalid-argument", `tools[${i}].function.name ${t.function.name} is not unique`);
    names.add(t.function.name);
  }
  if (choice === undefined || choice === "auto" || choice === "required") return tools;
  if (choice === "none") return [];
  if (typeof choice === "object" && choice !== null && choice.type === "function" && typeof choice.function?.name === "string") {
    const named = tools.filter((t) => t.function.name === choice.function.name);
    if (named.length === 0) throw new FuselmError("invalid-argument", `tool_choice names ${choice.function.name}, which is not in tools`);
    return named;
  }
  throw new FuselmError("invalid-argument", 'tool_choice must be "auto", "none", "required" or { type: "function", function: { name } }');
}

/** The system-message text that describes `tools` and the call format. */
export function toolInstructions(tools: ChatTool[], words: boolean, parallel: boolean): string {
  const lines = [
    "You can call these functions:",
    ...tools.map((t) => {
      const f = t.function;
      return `- ${f.name}${f.description ? `: ${f.description}` : ""}. Arguments (JSON Schema): ${JSON.stringify(f.parameters ?? { type: "object" })}`;
    }),
    `To call a function, reply with only the JSON object {"name": <function name>, "arguments": <arguments object>}` +
      (parallel ? "; to call several, a JSON array of such objects." : "."),
  ];
  if (words) lines.push("If no function is needed, answer in words.");
  return lines.join("\n");
}

/** The response format that holds the answer to calls of `tools` (or words too). */
export function toolFormat(tools: ChatTool[], words: boolean, parallel: boolean): ResponseFormat {
  const call = (t: ChatTool): JsonSchema => ({
    type: "object",
    properties: { name: { const: t.function.name }, arguments: t.function.parameters ?? { type: "object" } },
    required: ["name", "arguments"],
    additionalProperties: false,
  });
  const one: JsonSchema = tools.length === 1 ? call(tools[0]) : { anyOf: tools.map(call) };
  const schema: JsonSchema = parallel
    ? { anyOf: [one, { type: "array", items: one, minItems: 1, maxItems: MAX_PARALLEL_CALLS }] }
    : one;
  return { type: "json_schema", schema, orText: words };
}

let calls = 0;
const callId = () => `call_${Date.now().toString(36)}${(calls++).toString(36)}`;

/** The calls in an answer, or undefined when it is words (or incomplete JSON). */
export function parseToolCalls(text: string, tools: ChatTool[]): ChatToolCall[] | undefined {
  const trimmed = text.trim();
  if (!trimmed.startsWith("{") && !trimmed.startsWith("[")) return undefined;
  let value: JsonValue;
  try {
    value = JSON.parse(trimmed) as JsonValue;
  } catch {
    return undefined;
  }
  const list = Array.isArray(value) ? value : [value];
  const out: ChatToolCall[] = [];
  for (const c of list) {
    if (typeof c !== "object" || c === null || Array.isArray(c)) return undefined;
    const name = c.name;
    if (typeof name !== "string" || !tools.some((t) => t.function.name === name)) return undefined;
    out.push({ id: callId(), type: "function", function: { name, arguments: JSON.stringify(c.arguments ?? {}) } });
  }
  return out.length > 0 ? out : undefined;
}

/** A conversation message: a plain turn, an assistant turn that called tools, or a tool's
 * result (OpenAI's shapes). */
export type ChatCompletionMessage =
  | ChatMessage
  | { role: "assistant"; content: string | null; tool_calls: ChatToolCall[] }
  | { role: "tool"; tool_call_id: string; content: string };

/** The conversation as the chat template takes it: an assistant's calls as the JSON it wrote,
 * a tool's result as a "tool" turn. */
export function templateMessages(messages: ChatCompletionMessage[]): ChatMessage[] {
  return messages.map((m) => {
    if ("tool_calls" in m && Array.isArray(m.tool_calls)) {
      const written = m.tool_calls.map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) as JsonValue }));
      return { role: "assistant", content: JSON.stringify(written.length === 1 ? written[0] : written) };
    }
    return { role: m.role, content: m.content ?? "" };
  });
}

/** `messages` with the tools' description in the system message (added first when none). */
export function withToolInstructions(messages: ChatMessage[], instructions: string): ChatMessage[] {
  if (messages.length > 0 && messages[0].role === "system") {
    return [{ role: "system", content: `${messages[0].content}\n\n${instructions}` }, ...messages.slice(1)];
  }
  return [{ role: "system", content: instructions }, ...messages];
}
