// OpenAI tool calling over the tiny policy's tool-call markup (`<|tool_call|>name {json}<|/tool_call|>`,
// src/agents/markup.ts): how a chat request's `tools`/`tool_choice` become a plan, how generated text
// becomes `tool_calls`, and how earlier calls are written back as markup. Pure and dependency-free,
// so the built-in engine (which renders and answers) and the gateway's token path (which builds the
// answer from the engine's token ids) read the same output the same way.
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "./markup.js";
import type { ChatToolSpec } from "./chat-template.js";

/** One OpenAI tool call as an answer carries it. */
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

/** How one chat request uses tools: what the prompt declares and how the answer is read. */
export interface ToolPlan {
  /** Declared tools, rendered into the prompt. */
  specs: ChatToolSpec[];
  /** Whether calls in the output become `tool_calls` (not for tool_choice "none"). */
  parse: boolean;
  /** `parallel_tool_calls: false`. */
  single: boolean;
  /**
   * The text the answer is forced to start with (tool_choice "required" or a named function),
   * written at the end of the prompt so the policy can only continue a call. Always starts with
   * the `<|tool_call|>` marker.
   */
  prefill?: string;
}

/** The tool fields of an OpenAI chat request (already shape-checked by the caller). */
export interface ToolFields {
  tools?: readonly { function: { name: string; description?: string | null; parameters?: Record<string, unknown> | null } }[] | null;
  tool_choice?: "none" | "auto" | "required" | { type: "function"; function: { name: string } } | null;
  parallel_tool_calls?: boolean | null;
}

/** A tool_choice the tools cannot satisfy; `field` names the request field. */
export class ToolChoiceError extends Error {
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(`${field}: ${reason}`);
    this.name = "ToolChoiceError";
  }
}

/** The tool plan of a chat request (undefined without tools). Throws {@link ToolChoiceError}. */
export function planTools(body: ToolFields): ToolPlan | undefined {
  const tools = body.tools ?? [];
  const choice = body.tool_choice ?? "auto";
  if (tools.length === 0) {
    if (choice !== "auto" && choice !== "none") throw new ToolChoiceError("tool_choice", "requires tools");
    return undefined;
  }
  const specs = toolSpecs(tools);
  const plan: ToolPlan = { specs, parse: choice !== "none", single: body.parallel_tool_calls === false };
  if (choice === "required") plan.prefill = TOOL_CALL_OPEN;
  else if (typeof choice === "object") {
    const name = choice.function.name;
    if (!specs.some((s) => s.name === name)) throw new ToolChoiceError("tool_choice.function.name", `no tool named '${name}' in tools`);
    plan.prefill = `${TOOL_CALL_OPEN}${name} `;
  }
  return plan;
}

/** The prefill's text after its `<|tool_call|>` marker (what is tokenized as plain text). */
export function prefillText(prefill: string): string {
  return prefill.slice(TOOL_CALL_OPEN.length);
}

/** Declared OpenAI tools as the chat template renders them. */
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
    ...(plan.prefill !== undefined ? { prefill: plan.prefill } : {}),
  });
}

/** A chat answer's message with its tool calls read out. */
export interface ToolCallAnswer {
  message: { role: "assistant"; content: string | null; tool_calls?: OpenAiToolCall[] };
  finishReason: string;
}

/**
 * A whole answer's chat message under `plan`: the text outside valid calls as `content` (null when
 * the answer is only calls), the calls as `tool_calls`, and finish_reason "tool_calls" for an answer
 * with calls that stopped by itself. What the streamed chunks of the same answer add up to.
 */
export function toolCallAnswer(text: string, finishReason: string, plan: ToolPlan, idPrefix: string): ToolCallAnswer {
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
