// Translates an OpenAI Responses request (POST /v1/responses, the OpenAI Agents SDK's default API) into
// the chat.completions body the backends speak: instructions → system message, function_call items →
// assistant tool_calls, function_call_output items → tool messages, reasoning items (the answer's own,
// sent back) → the next assistant turn's reasoning_content, so the token path sees the turn it answered. Bad input is a 400 naming the field;
// so is every top-level field this surface does not serve (never dropped: the table in docs/architecture.md).
import { z } from "../../core/zod.js";
import { InvalidRequestError } from "../http-errors.js";
import type { ChatRequestBody, ChatRequestMessage, ChatToolCall } from "./anthropic-request.js";

const textPart = z.object({ type: z.enum(["input_text", "output_text"]), text: z.string() }).loose();
const messageItem = z
  .object({
    type: z.literal("message").optional(),
    role: z.enum(["user", "assistant", "system", "developer"]),
    content: z.union([z.string(), z.array(textPart)]),
  })
  .loose();
const functionCallItem = z
  .object({ type: z.literal("function_call"), call_id: z.string().min(1), name: z.string().min(1), arguments: z.string() })
  .loose();
const functionCallOutputItem = z
  .object({
    type: z.literal("function_call_output"),
    call_id: z.string().min(1),
    output: z.union([z.string(), z.array(textPart)]),
  })
  .loose();

// A reasoning item as the gateway returns it (and vLLM, OpenAI): its text in reasoning_text parts; an
// encrypted one has nothing the gateway could render, and a summary is not the policy's text.
const reasoningItem = z
  .object({
    type: z.literal("reasoning"),
    id: z.string().optional(),
    summary: z.array(z.unknown()).max(0, "a reasoning summary is not the policy's text; send the reasoning_text content").optional(),
    content: z.array(z.object({ type: z.literal("reasoning_text"), text: z.string() }).loose()).optional(),
    encrypted_content: z.null().optional(),
    status: z.string().nullable().optional(),
  })
  .strict();

const ITEM_TYPES = ["message", "function_call", "function_call_output", "reasoning"] as const;
const PART_TYPES = ["input_text", "output_text"] as const;

const functionTool = z
  .object({
    type: z.literal("function"),
    name: z.string().min(1),
    description: z.string().nullable().optional(),
    parameters: z.record(z.string(), z.unknown()).nullable().optional(),
    strict: z.boolean().nullable().optional(),
  })
  .loose();

const requestSchema = z.strictObject({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.unknown())]),
  instructions: z.string().nullable().optional(),
  max_output_tokens: z.number().int().min(1).nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  tools: z.array(z.unknown()).optional(),
  tool_choice: z
    .union([
      z.enum(["auto", "none", "required"]),
      z.object({ type: z.literal("function"), name: z.string().min(1) }).loose(),
    ])
    .optional(),
  parallel_tool_calls: z.boolean().nullable().optional(),
  stream: z.boolean().nullable().optional(),
  previous_response_id: z.string().nullable().optional(),
  user: z.string().optional(),
  program_id: z.string().optional(),
  // Accepted without effect on the answer: nothing is kept for later retrieval (previous_response_id
  // and conversation are refused), tags and cache/safety identifiers change no token, every call is
  // served at one tier.
  store: z.boolean().nullable().optional(),
  // Echoed in the Response, as OpenAI does (checked as OpenAI checks it: checkMetadata).
  metadata: z.record(z.string(), z.string()).nullable().optional(),
  prompt_cache_key: z.string().nullable().optional(),
  prompt_cache_retention: z.string().nullable().optional(),
  safety_identifier: z.string().nullable().optional(),
  service_tier: z.string().nullable().optional(),
  // Only what the gateway does anyway: no extra output to include, plain text, no truncation, in the foreground.
  include: z.array(z.string()).max(0, "no extra output can be included by this gateway (send [] or leave it out)").nullable().optional(),
  text: z
    .strictObject({ format: z.strictObject({ type: z.literal("text", "only {type: 'text'} is supported (no constrained decoding)") }).optional() })
    .nullable()
    .optional(),
  truncation: z.literal("disabled", "only 'disabled' is supported (the gateway does not truncate the conversation)").nullable().optional(),
  background: z.literal(false, "background responses are not supported (the gateway keeps no responses)").nullable().optional(),
  reasoning: z.strictObject({}).nullable().optional(),
  // Chat's n: one answer per response; refused rather than ignored.
  n: z.number().refine((v) => v === 1, { error: "only n = 1 is supported (one output per response)" }).nullable().optional(),
});

// The top-level fields this surface serves or accepts (each translated or checked here).
const KNOWN_FIELDS = new Set(Object.keys(requestSchema.shape));

/** What the Response object echoes back from its request. */
export interface ResponsesEcho {
  model: string;
  instructions: string | null;
  temperature: number | null;
  top_p: number | null;
  max_output_tokens: number | null;
  tool_choice: "auto" | "none" | "required" | { type: "function"; name: string };
  tools: z.infer<typeof functionTool>[];
  parallel_tool_calls: boolean;
  /** The request's metadata ({} when it sent none). */
  metadata: Record<string, string>;
}

/** A translated Responses request: the upstream chat body plus what the answer echoes. */
export interface TranslatedResponsesRequest {
  /** Includes `program_id` when the request named one, so the gateway can address the program. */
  chat: Omit<ChatRequestBody, "max_tokens"> & { max_tokens?: number; program_id?: string };
  echo: ResponsesEcho;
  /** Per chat message, the request's field it came from (`instructions`, `input`, `input.2.content`), for errors naming it. */
  messageFields: string[];
}

/**
 * Validate a Responses request and translate it to an OpenAI chat.completions body.
 * Fields without effect on the answer (store, metadata, cache and safety identifiers, service_tier)
 * are accepted; fields the gateway does not serve (reasoning settings, include, structured text
 * formats, truncation 'auto', background, conversation, previous_response_id, unknown ones), item types
 * other than messages and function calls and non-function tools are rejected. Throws
 * {@link InvalidRequestError} naming the field.
 */
export function responsesToChat(raw: unknown): TranslatedResponsesRequest {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new InvalidRequestError(null, "request body must be a JSON object");
  }
  for (const key of Object.keys(raw)) {
    if (!KNOWN_FIELDS.has(key)) throw new InvalidRequestError(key, `is not supported by this gateway (supported: ${[...KNOWN_FIELDS].join(", ")})`);
  }
  const parsed = requestSchema.safeParse(raw);
  if (!parsed.success) throw fromZod(parsed.error.issues[0], []);
  const req = parsed.data;
  if (req.metadata != null) checkMetadata(req.metadata);
  if (req.previous_response_id != null) {
    throw new InvalidRequestError("previous_response_id", "the gateway stores no responses; send the whole conversation in input");
  }

  const messages: ChatRequestMessage[] = [];
  const messageFields: string[] = [];
  if (req.instructions != null && req.instructions !== "") {
    messages.push({ role: "system", content: req.instructions });
    messageFields.push("instructions");
  }
  if (typeof req.input === "string") {
    messages.push({ role: "user", content: req.input });
    messageFields.push("input");
  } else {
    const pending: PendingReasoning = {};
    req.input.forEach((item, i) => addItem(messages, messageFields, item, i, pending));
    if (pending.text !== undefined) throw new InvalidRequestError(`input.${pending.index}`, "a reasoning item must be followed by the assistant message or function_call it preceded");
  }
  if (messages.length === 0) throw new InvalidRequestError("input", "at least one input item is required");

  const tools = (req.tools ?? []).map((t, i) => {
    const type = (t as { type?: unknown } | null)?.type;
    if (type !== "function") {
      throw new InvalidRequestError(`tools.${i}.type`, `tool type ${JSON.stringify(type)} is not supported by this gateway (supported: function)`);
    }
    const tool = functionTool.safeParse(t);
    if (!tool.success) throw fromZod(tool.error.issues[0], ["tools", i]);
    return tool.data;
  });

  const chat: TranslatedResponsesRequest["chat"] = { model: req.model, messages };
  if (req.max_output_tokens != null) chat.max_tokens = req.max_output_tokens;
  if (req.temperature != null) chat.temperature = req.temperature;
  if (req.top_p != null) chat.top_p = req.top_p;
  if (req.stream === true) {
    chat.stream = true;
    // The closing response.completed carries usage; OpenAI chat streams it only when asked.
    chat.stream_options = { include_usage: true };
  }
  if (req.user !== undefined) chat.user = req.user;
  if (req.program_id !== undefined) chat.program_id = req.program_id;
  if (tools.length > 0) {
    chat.tools = tools.map((t) => ({
      type: "function" as const,
      function: {
        name: t.name,
        ...(t.description != null ? { description: t.description } : {}),
        parameters: t.parameters ?? { type: "object", properties: {} },
      },
    }));
  }
  const choice = req.tool_choice;
  if (choice !== undefined) {
    if (typeof choice === "object" && !tools.some((t) => t.name === choice.name)) {
      throw new InvalidRequestError("tool_choice.name", `no function tool named '${choice.name}' in tools`);
    }
    chat.tool_choice = typeof choice === "string" ? choice : { type: "function", function: { name: choice.name } };
  }
  if (req.parallel_tool_calls != null && tools.length > 0) chat.parallel_tool_calls = req.parallel_tool_calls;

  const echo: ResponsesEcho = {
    model: req.model,
    instructions: req.instructions ?? null,
    temperature: req.temperature ?? null,
    top_p: req.top_p ?? null,
    max_output_tokens: req.max_output_tokens ?? null,
    tool_choice: typeof choice === "object" ? { type: "function", name: choice.name } : (choice ?? "auto"),
    tools,
    parallel_tool_calls: req.parallel_tool_calls ?? true,
    metadata: req.metadata ?? {},
  };
  return { chat, echo, messageFields };
}

/** OpenAI's bounds on metadata: at most this many keys, of at most KEY chars, with values of at most VALUE chars. */
const METADATA = { keys: 16, key: 64, value: 512 };

// OpenAI refuses metadata past its bounds; the echo should not hold what OpenAI would never have taken.
function checkMetadata(metadata: Record<string, string>): void {
  const keys = Object.keys(metadata);
  if (keys.length > METADATA.keys) throw new InvalidRequestError("metadata", `must have at most ${METADATA.keys} keys, got ${keys.length}`);
  for (const key of keys) {
    if (key.length > METADATA.key) throw new InvalidRequestError("metadata", `keys must be at most ${METADATA.key} characters, got ${key.length} in '${key.slice(0, 64)}…'`);
    const value = metadata[key] as string;
    if (value.length > METADATA.value) throw new InvalidRequestError(`metadata.${key}`, `must be at most ${METADATA.value} characters, got ${value.length}`);
  }
}

function fromZod(issue: { path: PropertyKey[]; message: string; code?: string; keys?: string[] } | undefined, prefix: PropertyKey[]): InvalidRequestError {
  // An unknown key of a strict object is named as the field.
  if (issue?.code === "unrecognized_keys" && issue.keys?.[0] !== undefined) {
    return new InvalidRequestError([...prefix, ...issue.path, issue.keys[0]].join("."), "is not supported by this gateway");
  }
  const path = [...prefix, ...(issue?.path ?? [])];
  return new InvalidRequestError(path.length > 0 ? path.join(".") : null, issue?.message ?? "invalid request");
}

// Consecutive function_call items (and the assistant text before them) form one assistant turn,
// as chat completions expects: one assistant message carrying all of that turn's tool_calls (named
// in `fields` by the item that began it).
/** A reasoning item not yet given to the assistant turn it precedes. */
interface PendingReasoning {
  text?: string;
  index?: number;
}

function addItem(messages: ChatRequestMessage[], fields: string[], item: unknown, i: number, pending: PendingReasoning): void {
  if (typeof item !== "object" || item === null || Array.isArray(item)) {
    throw new InvalidRequestError(`input.${i}`, "must be an object (a message, function_call or function_call_output item)");
  }
  const type = (item as { type?: unknown }).type ?? "message";
  if (typeof type !== "string" || !(ITEM_TYPES as readonly string[]).includes(type)) {
    throw new InvalidRequestError(`input.${i}.type`, `input item type ${JSON.stringify(type)} is not supported by this gateway (supported: ${ITEM_TYPES.join(", ")})`);
  }
  if (type === "reasoning") {
    const r = reasoningItem.safeParse(item);
    if (!r.success) throw fromZod(r.error.issues[0], ["input", i]);
    pending.text = (pending.text ?? "") + (r.data.content ?? []).map((p) => p.text).join("");
    pending.index ??= i;
    return;
  }
  // The reasoning sent back belongs to the assistant turn it came before (an answer's items: reasoning, then message or calls).
  const thought = pending.text;
  if (thought !== undefined) {
    const opensTurn = type === "function_call" || (type === "message" && (item as { role?: unknown }).role === "assistant");
    if (!opensTurn) throw new InvalidRequestError(`input.${pending.index}`, "a reasoning item must be followed by the assistant message or function_call it preceded");
    delete pending.text;
    delete pending.index;
  }
  const withReasoning = (m: ChatRequestMessage): ChatRequestMessage => (thought !== undefined && m.role === "assistant" ? { ...m, reasoning_content: thought } : m);
  if (type === "message") {
    rejectUnsupportedParts((item as { content?: unknown }).content, `input.${i}.content`);
    const m = messageItem.safeParse(item);
    if (!m.success) throw fromZod(m.error.issues[0], ["input", i]);
    const text = typeof m.data.content === "string" ? m.data.content : m.data.content.map((p) => p.text).join("");
    const role = m.data.role === "developer" ? "system" : m.data.role;
    if (role === "assistant") messages.push(withReasoning({ role: "assistant", content: text }));
    else messages.push({ role, content: text });
    fields.push(`input.${i}.content`);
    return;
  }
  if (type === "function_call") {
    const c = functionCallItem.safeParse(item);
    if (!c.success) throw fromZod(c.error.issues[0], ["input", i]);
    const call: ChatToolCall = { id: c.data.call_id, type: "function", function: { name: c.data.name, arguments: c.data.arguments } };
    const last = messages.at(-1);
    if (last?.role === "assistant" && thought === undefined) last.tool_calls = [...(last.tool_calls ?? []), call];
    else {
      messages.push(withReasoning({ role: "assistant", content: null, tool_calls: [call] }));
      fields.push(`input.${i}`);
    }
    return;
  }
  rejectUnsupportedParts((item as { output?: unknown }).output, `input.${i}.output`);
  const o = functionCallOutputItem.safeParse(item);
  if (!o.success) throw fromZod(o.error.issues[0], ["input", i]);
  const known = messages.some((m) => m.role === "assistant" && m.tool_calls?.some((tc) => tc.id === o.data.call_id));
  if (!known) throw new InvalidRequestError(`input.${i}.call_id`, `'${o.data.call_id}' matches no earlier function_call item`);
  const output = typeof o.data.output === "string" ? o.data.output : o.data.output.map((p) => p.text).join("");
  messages.push({ role: "tool", tool_call_id: o.data.call_id, content: output });
  fields.push(`input.${i}.output`);
}

// Images, files and audio have no text-only equivalent: name the part instead of zod's generic message.
function rejectUnsupportedParts(parts: unknown, where: string): void {
  if (!Array.isArray(parts)) return;
  parts.forEach((p: unknown, j) => {
    const type = (p as { type?: unknown } | null)?.type;
    if (typeof type === "string" && !(PART_TYPES as readonly string[]).includes(type)) {
      throw new InvalidRequestError(`${where}.${j}.type`, `content part type '${type}' is not supported by this gateway (supported: ${PART_TYPES.join(", ")})`);
    }
  });
}
