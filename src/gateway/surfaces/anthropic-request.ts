// Translates an Anthropic Messages request (POST /v1/messages) into the OpenAI chat.completions body
// the gateway's backends speak: system → first system message, tool_use → assistant tool_calls,
// thinking → the assistant turn's reasoning_content (so templates that re-render reasoning see it and
// the token path can tell the answer sent back is the engine's), tool_result → tool messages,
// tools → functions. Bad input fails with Anthropic's 400, naming the field. Every field a client
// sends is either served or refused (400 naming it), never dropped: unknown top-level fields, unknown
// keys of blocks, tools and metadata, and server tools are refused (the table in docs/architecture.md).
// Arbor's own `program_id` (the program a call belongs to, as on chat and Responses) is passed on.
// A final assistant message is a prefill, as on Anthropic's API: the answer continues it (chat's
// vLLM `continue_final_message`), and holds only the continuation.
import { z } from "../../core/zod.js";
import { AnthropicError } from "./anthropic-error.js";

const cacheControl = z.unknown().optional();
// cache_control is served by the engine's prefix cache: every prompt is cached whether marked or not.
const textBlock = z.strictObject({ type: z.literal("text"), text: z.string(), cache_control: cacheControl });
const toolUseBlock = z.strictObject({
  type: z.literal("tool_use"),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.record(z.string(), z.unknown()),
  cache_control: cacheControl,
});
const toolResultBlock = z.strictObject({
  type: z.literal("tool_result"),
  tool_use_id: z.string().min(1),
  content: z.union([z.string(), z.array(textBlock)]).optional(),
  is_error: z.boolean().optional(),
  cache_control: cacheControl,
});
// The signature Anthropic's API signs its thinking with; the gateway's answers carry none to check.
const thinkingBlock = z.strictObject({ type: z.literal("thinking"), thinking: z.string(), signature: z.string().optional(), cache_control: cacheControl });
const BLOCK_TYPES = ["text", "tool_use", "tool_result", "thinking"] as const;
const block = z.discriminatedUnion("type", [textBlock, toolUseBlock, toolResultBlock, thinkingBlock]);
const content = z.union([z.string(), z.array(block)]);

const requestSchema = z.strictObject({
  model: z.string().min(1),
  max_tokens: z.number().int().min(1),
  system: z.union([z.string(), z.array(textBlock)]).optional(),
  messages: z
    .array(z.object({ role: z.enum(["user", "assistant", "system"]), content }))
    .min(1, "at least one message is required"),
  temperature: z.number().min(0).max(1).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.number().int().min(0).optional(),
  stop_sequences: z.array(z.string()).optional(),
  stream: z.boolean().optional(),
  metadata: z.strictObject({ user_id: z.string().nullable().optional() }).optional(),
  /**
   * Extended thinking: the policy's reasoning (the backend's reasoning parser) comes back as thinking
   * blocks. budget_tokens is checked as Anthropic does (>= 1024, < max_tokens) but not enforced on
   * its own: the whole output, thinking included, is bounded by max_tokens.
   */
  thinking: z
    .discriminatedUnion("type", [
      z.strictObject({ type: z.literal("enabled"), budget_tokens: z.number().int().min(1024) }),
      z.strictObject({ type: z.literal("adaptive") }),
      z.strictObject({ type: z.literal("disabled") }),
    ])
    .optional(),
  // A scheduling preference of Anthropic's API: every call here is served alike, and the answer says so.
  service_tier: z.enum(["auto", "standard_only"]).optional(),
  tools: z
    .array(
      z.strictObject({
        // Client tools only ("custom", or no type); server tools are refused before this (the gateway runs none).
        type: z.literal("custom").optional(),
        name: z.string().min(1),
        description: z.string().optional(),
        input_schema: z.object({ type: z.literal("object") }).loose(),
        cache_control: cacheControl,
      }),
    )
    .optional(),
  tool_choice: z
    .discriminatedUnion("type", [
      z.object({ type: z.literal("auto"), disable_parallel_tool_use: z.boolean().optional() }),
      z.object({ type: z.literal("any"), disable_parallel_tool_use: z.boolean().optional() }),
      z.object({ type: z.literal("tool"), name: z.string().min(1), disable_parallel_tool_use: z.boolean().optional() }),
      z.object({ type: z.literal("none") }),
    ])
    .optional(),
  // Arbor's, not Anthropic's: the call's program, as the chat and Responses surfaces take it (the "no program" 400 offers it).
  program_id: z.string().nullable().optional(),
});

export type AnthropicRequest = z.infer<typeof requestSchema>;
type Block = z.infer<typeof block>;

/** An OpenAI chat message as sent upstream. */
export type ChatRequestMessage =
  | { role: "system" | "user"; content: string }
  | { role: "assistant"; content: string | null; tool_calls?: ChatToolCall[]; reasoning_content?: string }
  | { role: "tool"; tool_call_id: string; content: string };

export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** The OpenAI chat.completions body derived from an Anthropic request. */
export interface ChatRequestBody {
  model: string;
  messages: ChatRequestMessage[];
  max_tokens: number;
  temperature?: number;
  top_p?: number;
  /** Not OpenAI's, but vLLM and SGLang accept it; other upstreams ignore unknown fields. */
  top_k?: number;
  stop?: string[];
  stream?: boolean;
  stream_options?: { include_usage: boolean };
  user?: string;
  tools?: { type: "function"; function: { name: string; description?: string; parameters: Record<string, unknown> } }[];
  tool_choice?: "auto" | "required" | "none" | { type: "function"; function: { name: string } };
  parallel_tool_calls?: boolean;
  /** vLLM's: a final assistant message (Anthropic's prefill) left open and continued, no generation prompt. */
  add_generation_prompt?: false;
  continue_final_message?: true;
  /** Arbor's: the call's program (prepareRequest takes it off what goes upstream). */
  program_id?: string;
}

/** Validate an Anthropic Messages request and translate it to an OpenAI chat.completions body (see {@link translateAnthropic}). */
export function anthropicToChat(raw: unknown): ChatRequestBody {
  return translateAnthropic(raw).chat;
}

/**
 * Validate an Anthropic Messages request and translate it to an OpenAI chat.completions body, with the
 * request's field each chat message came from (`system`, `messages.0.content`, a tool_result's
 * `messages.2.content.0.content`), so that an engine's refusal can name the client's field.
 * Fields it does not serve (top-level ones such as container or mcp_servers, unknown keys of blocks,
 * tools and metadata, server tools, image and document blocks) are refused, never ignored. Throws
 * {@link AnthropicError} (400) naming the field.
 */
export function translateAnthropic(raw: unknown): { chat: ChatRequestBody; messageFields: string[] } {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw AnthropicError.invalidRequest(null, "request body must be a JSON object");
  }
  rejectUnknownFields(raw as Record<string, unknown>);
  rejectUnsupportedBlocks(raw as Record<string, unknown>);
  const parsed = requestSchema.safeParse(raw);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    const { path, message } = first ? mostSpecific(first) : { path: [], message: "invalid request" };
    throw AnthropicError.invalidRequest(path.length > 0 ? path.join(".") : null, message);
  }
  const req = parsed.data;
  if (req.thinking?.type === "enabled" && req.thinking.budget_tokens >= req.max_tokens) {
    throw AnthropicError.invalidRequest("thinking.budget_tokens", `must be less than max_tokens (${req.max_tokens}), got ${req.thinking.budget_tokens}`);
  }

  const messages: ChatRequestMessage[] = [];
  const messageFields: string[] = [];
  if (req.system !== undefined) {
    const text = typeof req.system === "string" ? req.system : joinText(req.system);
    if (text !== "") {
      messages.push({ role: "system", content: text });
      messageFields.push("system");
    }
  }
  let lastToolUseIds = new Set<string>();
  req.messages.forEach((m, i) => {
    if (m.role === "system") {
      messages.push({ role: "system", content: typeof m.content === "string" ? m.content : textOnly(m.content, i) });
      messageFields.push(`messages.${i}.content`);
      lastToolUseIds = new Set();
    } else if (m.role === "assistant") {
      messages.push(assistantMessage(m.content, i));
      messageFields.push(`messages.${i}.content`);
      lastToolUseIds = new Set(typeof m.content === "string" ? [] : m.content.flatMap((b) => (b.type === "tool_use" ? [b.id] : [])));
    } else {
      for (const u of userMessages(m.content, i, lastToolUseIds)) {
        messages.push(u.message);
        messageFields.push(u.field);
      }
      lastToolUseIds = new Set();
    }
  });

  const body: ChatRequestBody = { model: req.model, messages, max_tokens: req.max_tokens };
  const last = req.messages.length - 1;
  if (req.messages[last]?.role === "assistant") prefill(body, messageFields, last);
  if (req.temperature !== undefined) body.temperature = req.temperature;
  if (req.top_p !== undefined) body.top_p = req.top_p;
  if (req.top_k !== undefined) body.top_k = req.top_k;
  if (req.stop_sequences !== undefined && req.stop_sequences.length > 0) body.stop = req.stop_sequences;
  if (req.stream === true) {
    body.stream = true;
    // Anthropic's closing message_delta carries usage; OpenAI streams it only when asked.
    body.stream_options = { include_usage: true };
  }
  if (req.metadata?.user_id) body.user = req.metadata.user_id;
  if (typeof req.program_id === "string") body.program_id = req.program_id;
  if (req.tools !== undefined && req.tools.length > 0) {
    body.tools = req.tools.map((t) => ({
      type: "function" as const,
      function: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), parameters: t.input_schema },
    }));
  }
  const choice = req.tool_choice;
  if (choice !== undefined) {
    if (choice.type === "tool" && !req.tools?.some((t) => t.name === choice.name)) {
      throw AnthropicError.invalidRequest("tool_choice.name", `no tool named '${choice.name}' in tools`);
    }
    body.tool_choice =
      choice.type === "auto" ? "auto" : choice.type === "any" ? "required" : choice.type === "none" ? "none" : { type: "function", function: { name: choice.name } };
    if (choice.type !== "none" && choice.disable_parallel_tool_use === true) body.parallel_tool_calls = false;
  }
  return { chat: body, messageFields };
}

type Issue = { path: PropertyKey[]; message: string; code?: string; errors?: Issue[][]; keys?: string[] };

// The top-level fields this surface serves (each translated or checked below).
const KNOWN_FIELDS = new Set(Object.keys(requestSchema.shape));

// Fields Anthropic's API has that this gateway does not serve: named, with the reason.
function rejectUnknownFields(body: Record<string, unknown>): void {
  for (const key of Object.keys(body)) {
    if (KNOWN_FIELDS.has(key)) continue;
    throw AnthropicError.invalidRequest(key, `is not supported by this gateway (supported: ${[...KNOWN_FIELDS].join(", ")})`);
  }
  const tools = body.tools;
  if (!Array.isArray(tools)) return;
  tools.forEach((t: unknown, i) => {
    const type = (t as { type?: unknown } | null)?.type;
    if (type !== undefined && type !== null && type !== "custom") {
      throw AnthropicError.invalidRequest(`tools.${i}.type`, `server tool ${JSON.stringify(type)} is not supported by this gateway (it runs no server tools; declare client tools)`);
    }
  });
}

// A union (string | blocks) reports only "Invalid input" at its own path; the branch that got
// furthest names the real field, e.g. `messages.0.content.0.text`. An unknown key of a strict
// object is named as the field.
function mostSpecific(issue: Issue): { path: PropertyKey[]; message: string } {
  if (issue.code === "unrecognized_keys" && issue.keys && issue.keys.length > 0) {
    return { path: [...issue.path, issue.keys[0] as string], message: "is not supported by this gateway" };
  }
  if (issue.code !== "invalid_union" || !issue.errors) return issue;
  let best: { path: PropertyKey[]; message: string } = issue;
  for (const branch of issue.errors) {
    const inner = branch[0];
    if (!inner) continue;
    const found = mostSpecific(inner);
    const path = [...issue.path, ...found.path];
    if (path.length > best.path.length) best = { path, message: found.message };
  }
  return best;
}

// zod's message for an unknown discriminator is generic; name the block type instead.
function rejectUnsupportedBlocks(body: Record<string, unknown>): void {
  if (!Array.isArray(body.messages)) return;
  body.messages.forEach((m: unknown, i) => {
    const blocks = (m as { content?: unknown } | null)?.content;
    if (!Array.isArray(blocks)) return;
    blocks.forEach((b: unknown, j) => {
      const type = (b as { type?: unknown } | null)?.type;
      if (typeof type === "string" && !(BLOCK_TYPES as readonly string[]).includes(type)) {
        throw AnthropicError.invalidRequest(
          `messages.${i}.content.${j}.type`,
          `content block type '${type}' is not supported by this gateway (supported: ${BLOCK_TYPES.join(", ")})`,
        );
      }
    });
  });
}

/**
 * A final assistant message is Anthropic's prefill: the answer continues its text. Checked as Anthropic checks it
 * (no trailing whitespace), and refused where it makes tool calls (there is no text of the model's to continue). An
 * empty one (no text, no thinking) continues nothing: the turn is opened as usual.
 */
function prefill(body: ChatRequestBody, messageFields: string[], i: number): void {
  const msg = body.messages.at(-1) as Extract<ChatRequestMessage, { role: "assistant" }>;
  if (msg.tool_calls !== undefined) throw AnthropicError.invalidRequest(`messages.${i}.content`, "a final assistant message (prefill) cannot hold tool_use blocks; its answer would continue no text");
  const text = msg.content ?? "";
  if (/\s$/.test(text)) throw AnthropicError.invalidRequest("messages", "final assistant content cannot end with trailing whitespace");
  if (text === "" && msg.reasoning_content === undefined) {
    body.messages.pop();
    messageFields.pop();
    return;
  }
  msg.content = text;
  body.add_generation_prompt = false;
  body.continue_final_message = true;
}

function joinText(blocks: { text: string }[]): string {
  return blocks.map((b) => b.text).join("\n");
}

function textOnly(blocks: Block[], i: number): string {
  const other = blocks.findIndex((b) => b.type !== "text");
  if (other >= 0) throw AnthropicError.invalidRequest(`messages.${i}.content.${other}.type`, "a system message may hold only text blocks");
  return joinText(blocks as { text: string }[]);
}

function assistantMessage(content: string | Block[], i: number): ChatRequestMessage {
  if (typeof content === "string") return { role: "assistant", content };
  const texts: string[] = [];
  const toolCalls: ChatToolCall[] = [];
  const thoughts: string[] = [];
  content.forEach((b, j) => {
    if (b.type === "text") texts.push(b.text);
    else if (b.type === "tool_use") toolCalls.push({ id: b.id, type: "function", function: { name: b.name, arguments: JSON.stringify(b.input) } });
    else if (b.type === "thinking") thoughts.push(b.thinking);
    else throw AnthropicError.invalidRequest(`messages.${i}.content.${j}.type`, "tool_result blocks belong in user messages");
  });
  const msg: ChatRequestMessage = { role: "assistant", content: texts.length > 0 ? texts.join("\n") : null };
  if (toolCalls.length > 0) msg.tool_calls = toolCalls;
  if (thoughts.length > 0) msg.reasoning_content = thoughts.join("");
  return msg;
}

// OpenAI wants each tool message right after the assistant turn that called the tool, so a user turn's
// tool_results come first, then its text. Each with the field it came from.
function userMessages(content: string | Block[], i: number, openToolUses: Set<string>): { message: ChatRequestMessage; field: string }[] {
  if (typeof content === "string") return [{ message: { role: "user", content }, field: `messages.${i}.content` }];
  const tools: { message: ChatRequestMessage; field: string }[] = [];
  const texts: string[] = [];
  content.forEach((b, j) => {
    if (b.type === "text") texts.push(b.text);
    else if (b.type === "tool_result") {
      if (!openToolUses.has(b.tool_use_id)) {
        throw AnthropicError.invalidRequest(
          `messages.${i}.content.${j}.tool_use_id`,
          `'${b.tool_use_id}' matches no tool_use block in the previous assistant message`,
        );
      }
      const text = b.content === undefined ? "" : typeof b.content === "string" ? b.content : joinText(b.content);
      // OpenAI has no is_error flag; keep the fact in the text the model reads.
      const message: ChatRequestMessage = { role: "tool", tool_call_id: b.tool_use_id, content: b.is_error === true ? `[tool error] ${text}` : text };
      tools.push({ message, field: `messages.${i}.content.${j}.content` });
    } else throw AnthropicError.invalidRequest(`messages.${i}.content.${j}.type`, `${b.type} blocks belong in assistant messages`);
  });
  return texts.length > 0 ? [...tools, { message: { role: "user", content: texts.join("\n") }, field: `messages.${i}.content` }] : tools;
}
