// OpenAI tool calling on the built-in engine: the tiny policy writes tool calls in its own markup
// (`<|tool_call|>name {json arguments}<|/tool_call|>`, src/agents/markup.ts); when a chat request
// declares `tools`, the engine turns valid calls in the output into OpenAI `tool_calls` (plain and
// streamed alike, through the same filter) and renders earlier calls back into the markup.
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../agents/markup.js";
import type { ChatToolSpec } from "../model/chat-template.js";
import { invalidRequest } from "./openai-errors.js";

/** One OpenAI tool call as the engine answers it. */
export interface OpenAiToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface ToolCallFilterOptions {
  /** Declared tool names; a call to any other name stays text. */
  names: ReadonlySet<string>;
  /** Prefix of the call ids (`<prefix>_<n>`); unique per answer. */
  idPrefix: string;
  /** `parallel_tool_calls: false`: calls after the first stay text. */
  single?: boolean;
  /** Text the answer is known to start with but the model did not generate (a forced call's opening). */
  prefill?: string;
}

/**
 * Splits generated text into content and tool calls as it arrives. Text that may still become a
 * call (an open marker, or the start of one) is held back until it is decided, so streamed deltas
 * never show markup that the plain answer would turn into a call. A call whose body is not
 * `<declared name> <JSON object or nothing>` is kept as text, markup included: nothing is dropped.
 */
export class ToolCallFilter {
  private buffer: string;
  private readonly calls: OpenAiToolCall[] = [];

  constructor(private readonly opts: ToolCallFilterOptions) {
    this.buffer = opts.prefill ?? "";
  }

  /** Calls found so far. */
  get callCount(): number {
    return this.calls.length;
  }

  /** Take a text delta; returns the content now safe to show and the calls completed by it. */
  push(text: string): { content: string; calls: OpenAiToolCall[] } {
    this.buffer += text;
    return this.drain(false);
  }

  /** The generation ended: everything held back (an unclosed call stays text). */
  flush(): { content: string; calls: OpenAiToolCall[] } {
    return this.drain(true);
  }

  private drain(final: boolean): { content: string; calls: OpenAiToolCall[] } {
    let content = "";
    const calls: OpenAiToolCall[] = [];
    for (;;) {
      const parsing = !(this.opts.single === true && this.calls.length > 0);
      const open = parsing ? this.buffer.indexOf(TOOL_CALL_OPEN) : -1;
      if (open < 0) {
        const keep = final || !parsing ? 0 : heldPrefix(this.buffer, TOOL_CALL_OPEN);
        content += this.buffer.slice(0, this.buffer.length - keep);
        this.buffer = this.buffer.slice(this.buffer.length - keep);
        break;
      }
      content += this.buffer.slice(0, open);
      this.buffer = this.buffer.slice(open);
      const close = this.buffer.indexOf(TOOL_CALL_CLOSE, TOOL_CALL_OPEN.length);
      if (close < 0) {
        if (final) {
          content += this.buffer;
          this.buffer = "";
        }
        break;
      }
      const whole = this.buffer.slice(0, close + TOOL_CALL_CLOSE.length);
      this.buffer = this.buffer.slice(whole.length);
      const call = this.toCall(whole.slice(TOOL_CALL_OPEN.length, close));
      if (call) {
        this.calls.push(call);
        calls.push(call);
      } else {
        content += whole;
      }
    }
    return { content, calls };
  }

  private toCall(body: string): OpenAiToolCall | undefined {
    const m = /^\s*([A-Za-z_][\w-]*)(?:\s([\s\S]*))?$/.exec(body);
    if (!m) return undefined;
    const name = m[1] as string;
    if (!this.opts.names.has(name)) return undefined;
    const input = (m[2] ?? "").trim();
    const args = input === "" ? "{}" : input;
    if (!isJsonObject(args)) return undefined;
    return { id: `${this.opts.idPrefix}_${this.calls.length}`, type: "function", function: { name, arguments: args } };
  }
}

/** Longest suffix of `text` that is a proper prefix of `marker` (it may still become the marker). */
function heldPrefix(text: string, marker: string): number {
  for (let n = Math.min(marker.length - 1, text.length); n > 0; n--) {
    if (text.endsWith(marker.slice(0, n))) return n;
  }
  return 0;
}

function isJsonObject(text: string): boolean {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === "object" && v !== null && !Array.isArray(v);
  } catch {
    return false;
  }
}

/** An assistant turn's tool calls in the policy's markup, after its text (how the policy wrote them). */
export function toolCallsAsMarkup(content: string, calls: readonly { function: { name: string; arguments: string } }[]): string {
  return content + calls.map((c) => `${TOOL_CALL_OPEN}${c.function.name} ${c.function.arguments}${TOOL_CALL_CLOSE}`).join("");
}

type ChunkChoice = { delta?: { content?: unknown; tool_calls?: unknown }; finish_reason?: unknown };

/**
 * Applies a {@link ToolCallFilter} to streamed chat chunks in place: content deltas lose what the
 * filter holds back, completed calls are added as `delta.tool_calls`, and the final chunk flushes
 * the rest and reports finish_reason "tool_calls" when the answer made calls and stopped by itself.
 * Token ids and logprobs are left as they are: the trace of every token still flows.
 */
export function filterToolCallChunk(filter: ToolCallFilter, chunk: Record<string, unknown>): Record<string, unknown> {
  const choices = chunk.choices as ChunkChoice[] | undefined;
  const choice = choices?.[0];
  if (!choice?.delta) return chunk;
  const text = typeof choice.delta.content === "string" ? choice.delta.content : "";
  const final = choice.finish_reason !== null && choice.finish_reason !== undefined;
  const got = filter.push(text);
  const rest = final ? filter.flush() : { content: "", calls: [] };
  const before = filter.callCount - got.calls.length - rest.calls.length;
  const calls = [...got.calls, ...rest.calls];
  const delta: Record<string, unknown> = { ...choice.delta, content: got.content + rest.content };
  if (calls.length > 0) {
    delta.tool_calls = calls.map((c, i) => ({ index: before + i, ...c }));
  }
  const out: ChunkChoice = { ...choice, delta };
  if (final && choice.finish_reason === "stop" && filter.callCount > 0) out.finish_reason = "tool_calls";
  return { ...chunk, choices: [out, ...(choices ?? []).slice(1)] };
}

/** How one chat request uses tools: what the prompt declares and how the answer is read. */
export interface ToolPlan {
  /** Declared tools, rendered into the prompt. */
  specs: ChatToolSpec[];
  /** Whether calls in the output become `tool_calls` (not for tool_choice "none"). */
  parse: boolean;
  /** `parallel_tool_calls: false`. */
  single: boolean;
  /**
   * The opening the answer is forced to start with (tool_choice "required" or a named function):
   * written at the end of the prompt, so the policy can only continue a call.
   */
  prefill?: { text: string; ids: number[] };
}

interface ToolFields {
  tools?: { function: { name: string; description?: string | null; parameters?: Record<string, unknown> | null } }[] | null;
  tool_choice?: "none" | "auto" | "required" | { type: "function"; function: { name: string } } | null;
  parallel_tool_calls?: boolean | null;
}

/**
 * The tool plan of a chat request (undefined without tools). `openId` is the `<|tool_call|>`
 * control token. Throws {@link HttpError} 400 for a tool_choice that names no declared tool.
 */
export function toolPlan(body: ToolFields, tokenize: (text: string) => number[], openId: number): ToolPlan | undefined {
  const tools = body.tools ?? [];
  const choice = body.tool_choice ?? "auto";
  if (tools.length === 0) {
    if (choice !== "auto" && choice !== "none") throw invalidRequest("tool_choice", "requires tools");
    return undefined;
  }
  const specs = toolSpecs(tools);
  const plan: ToolPlan = { specs, parse: choice !== "none", single: body.parallel_tool_calls === false };
  if (choice === "required") plan.prefill = { text: TOOL_CALL_OPEN, ids: [openId] };
  else if (typeof choice === "object") {
    const name = choice.function.name;
    if (!specs.some((s) => s.name === name)) throw invalidRequest("tool_choice.function.name", `no tool named '${name}' in tools`);
    plan.prefill = { text: `${TOOL_CALL_OPEN}${name} `, ids: [openId, ...tokenize(`${name} `)] };
  }
  return plan;
}

/** Declared OpenAI tools as the chat template renders them (as /v1/chat/completions does). */
export function toolSpecs(tools: NonNullable<ToolFields["tools"]>): ChatToolSpec[] {
  return tools.map((t) => ({
    name: t.function.name,
    ...(t.function.description != null ? { description: t.function.description } : {}),
    ...(t.function.parameters != null ? { parameters: t.function.parameters } : {}),
  }));
}

/** The filter reading one answer of `plan` (call ids `<idPrefix>_<n>`). */
export function toolCallFilter(plan: ToolPlan, idPrefix: string): ToolCallFilter {
  return new ToolCallFilter({
    names: new Set(plan.specs.map((s) => s.name)),
    idPrefix,
    single: plan.single,
    ...(plan.prefill ? { prefill: plan.prefill.text } : {}),
  });
}

/**
 * A whole answer's chat message under `plan`: the text outside valid calls as `content` (null when
 * the answer is only calls), the calls as `tool_calls`, and finish_reason "tool_calls" for an answer
 * with calls that stopped by itself. What the streamed chunks of the same answer add up to.
 */
export function toolCallAnswer(
  text: string,
  finishReason: string,
  plan: ToolPlan,
  idPrefix: string,
): { message: { role: "assistant"; content: string | null; tool_calls?: OpenAiToolCall[] }; finishReason: string } {
  if (!plan.parse) return { message: { role: "assistant", content: text }, finishReason };
  const filter = toolCallFilter(plan, idPrefix);
  const got = filter.push(text);
  const rest = filter.flush();
  const calls = [...got.calls, ...rest.calls];
  const content = got.content + rest.content;
  if (calls.length === 0) return { message: { role: "assistant", content }, finishReason };
  return {
    message: { role: "assistant", content: content === "" ? null : content, tool_calls: calls },
    finishReason: finishReason === "stop" ? "tool_calls" : finishReason,
  };
}
