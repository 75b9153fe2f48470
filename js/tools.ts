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

/** Nesting the call format adds around the arguments: the array of calls, the call, `arguments`. */
const WRAPPER_DEPTH = 3;

/** `schema` with its local references (`#`, `#/$defs/…`, `#/definitions/…`) pointed at
 * `prefix`-named entries of the combined schema's `$defs`, which `defs` receives. */
function hoist(schema: JsonSchema, prefix: string, defs: { [name: string]: JsonValue }): JsonSchema {
  const rename = (ref: string): string => {
    if (ref === "#") return `#/$defs/${prefix}`;
    const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref);
    if (m) return `#/$defs/${prefix}.${m[2]}`;
    throw new FuselmError("invalid-argument", `tools: ${prefix}: $ref ${JSON.stringify(ref)} must point into the parameters' $defs`);
  };
  const walk = (v: JsonValue): JsonValue => {
    if (Array.isArray(v)) return v.map(walk);
    if (typeof v !== "object" || v === null) return v;
    const out: { [key: string]: JsonValue } = {};
    for (const [k, x] of Object.entries(v)) {
      if (k === "$ref" && typeof x === "string") out[k] = rename(x);
      else if ((k === "$defs" || k === "definitions") && typeof x === "object" && x !== null && !Array.isArray(x)) {
        for (const [name, d] of Object.entries(x)) defs[`${prefix}.${name}`] = walk(d);
      } else out[k] = walk(x);
    }
    return out;
  };
  // A schema (an object or a boolean) stays one after its references are renamed.
  const top = walk(schema) as JsonSchema;
  defs[prefix] = top;
  return top;
}

/** The response format that holds the answer to calls of `tools` (or words too). */
export function toolFormat(tools: ChatTool[], words: boolean, parallel: boolean): ResponseFormat {
  const defs: { [name: string]: JsonValue } = {};
  const call = (t: ChatTool): JsonSchema => ({
    type: "object",
    properties: { name: { const: t.function.name }, arguments: hoist(t.function.parameters ?? { type: "object" }, t.function.name, defs) },
    required: ["name", "arguments"],
    additionalProperties: false,
  });
  const one: JsonSchema = tools.length === 1 ? call(tools[0]) : { anyOf: tools.map(call) };
  const schema: { [keyword: string]: JsonValue } = parallel
    ? { anyOf: [one, { type: "array", items: one, minItems: 1, maxItems: MAX_PARALLEL_CALLS }] }
    : { ...(one as { [keyword: string]: JsonValue }) };
  schema.$defs = defs;
  return { type: "json_schema", schema, orText: words, maxDepth: 5 + WRAPPER_DEPTH };
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
