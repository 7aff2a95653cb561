// How the token path reads one chat answer from the text the engine decoded: the request's tools
// (tool-plan.ts) with the backend's tool-call parser (Hermes/Qwen, Llama 3 JSON, Mistral, Arbor's
// markup: whatever format the served model writes), and the backend's reasoning parser
// (`<think>…</think>` → `reasoning_content`). The same reader serves whole answers and streamed
// deltas, so both add up to the same message, for every engine type.
import type { TokenBackend } from "../../backends/backend.js";
import type { ReasoningParser } from "../../model/reasoning/reasoning-parser.js";
import { reasoningTokenCount, type ReasoningMarkerIds } from "../../model/reasoning/reasoning-tokens.js";
import type { ToolPlan } from "../../model/tool-markup.js";
import type { ParsedCall, ToolCallParser, ToolCallStream } from "../../model/tool-parsers/tool-parser.js";

/** What one chat answer is read with on a given backend. */
export interface AnswerPlan {
  /** Declared tools whose calls are read out (absent: no tools, or tool_choice "none"). */
  tools?: { parser: ToolCallParser; names: ReadonlySet<string>; single: boolean };
  /** A forced call's opening in the parser's format: it ends the prompt, and the answer continues it. */
  prefill?: string;
  reasoning?: ReasoningParser;
  /** The reasoning parser's markers as the served model's ids (reasoning-markers.ts): its tokens can be counted. */
  reasoningMarkers?: ReasoningMarkerIds;
}

/**
 * The answer's reasoning tokens among its content ids (model/reasoning/reasoning-tokens.ts), for
 * usage's `reasoning_tokens`; undefined where the backend splits out no reasoning (usage then has
 * no such detail), 0 where its parser marks none.
 */
export function reasoningTokensOf(plan: AnswerPlan | undefined, contentIds: readonly number[]): number | undefined {
  if (!plan?.reasoning) return undefined;
  return plan.reasoningMarkers ? reasoningTokenCount(plan.reasoning, contentIds, plan.reasoningMarkers) : 0;
}

/**
 * The answer plan of a chat request with tool plan `tools` (and its raw `tool_choice`) on `backend`.
 * A forced call ("required", or a named function) opens with the parser's prefill.
 */
export function answerPlan(backend: Pick<TokenBackend, "toolParser" | "reasoningParser">, tools: ToolPlan | undefined, toolChoice: unknown): AnswerPlan {
  const plan: AnswerPlan = backend.reasoningParser ? { reasoning: backend.reasoningParser } : {};
  const parser = backend.toolParser;
  if (!tools || !tools.parse || !parser) return plan;
  plan.tools = { parser, names: new Set(tools.specs.map((s) => s.name)), single: tools.single };
  if (toolChoice === "required") plan.prefill = parser.prefill();
  else if (typeof toolChoice === "object" && toolChoice !== null) plan.prefill = parser.prefill((toolChoice as { function: { name: string } }).function.name);
  return plan;
}

/** What one pushed text delta yields: reasoning and content now safe to show, calls completed by it. */
export interface AnswerStep {
  reasoning: string;
  content: string;
  calls: ParsedCall[];
}

/**
 * Reads one answer as it arrives: reasoning is split off first (it comes before the answer), then
 * tool calls are read from the rest. Text that may still become markup is held back until decided.
 * With tools, content that is only whitespace before the first call is no content: it is the
 * separator templates write after the reasoning block (Qwen3's `</think>\n\n`), held back until
 * known, so a turn sent back re-renders to the model's own text instead of gaining a newline.
 */
export class AnswerReader {
  private readonly reasoning: ReturnType<ReasoningParser["stream"]> | undefined;
  private readonly calls: ToolCallStream | undefined;
  /** Leading whitespace not shown yet (it may only separate the reasoning from a call). */
  private held = "";
  /** Text or a call came: content goes out as the parser gives it. */
  private decided = false;

  constructor(plan: AnswerPlan, idPrefix: string) {
    this.reasoning = plan.reasoning?.stream();
    const t = plan.tools;
    this.calls = t
      ? t.parser.stream({ names: t.names, idPrefix, single: t.single, ...(plan.prefill !== undefined ? { prefill: plan.prefill } : {}) })
      : undefined;
  }

  /** Calls found so far. */
  get callCount(): number {
    return this.calls?.callCount ?? 0;
  }

  push(text: string): AnswerStep {
    const r = this.reasoning ? this.reasoning.push(text) : { reasoning: "", content: text };
    return this.readCalls(r.reasoning, r.content, false);
  }

  /** The generation ended: everything held back. */
  flush(): AnswerStep {
    const r = this.reasoning ? this.reasoning.flush() : { reasoning: "", content: "" };
    return this.readCalls(r.reasoning, r.content, true);
  }

  private readCalls(reasoning: string, content: string, final: boolean): AnswerStep {
    if (!this.calls) return { reasoning, content, calls: [] };
    const got = this.calls.push(content);
    if (!final) return { reasoning, content: this.leading(got.content, got.calls.length > 0, false), calls: got.calls };
    const rest = this.calls.flush();
    const calls = [...got.calls, ...rest.calls];
    return { reasoning, content: this.leading(got.content + rest.content, calls.length > 0, true), calls };
  }

  /** Content to show now: leading whitespace is held until text or a call decides it. */
  private leading(content: string, called: boolean, final: boolean): string {
    if (this.decided) return content;
    const text = this.held + content;
    this.held = "";
    if (called) {
      this.decided = true;
      return text.trim() === "" ? "" : text;
    }
    if (text.trim() !== "" || final) {
      this.decided = text.trim() !== "";
      return text;
    }
    this.held = text;
    return "";
  }
}

/** A whole chat answer as the client gets it. */
export interface ChatAnswer {
  message: { role: "assistant"; content: string | null; tool_calls?: ParsedCall[]; reasoning_content?: string };
  finishReason: string;
}

/**
 * A whole answer's chat message: content (null when the answer is only calls), `tool_calls`,
 * `reasoning_content` when there was reasoning, and finish_reason "tool_calls" for an answer with
 * calls that stopped by itself. What the streamed chunks of the same answer add up to.
 */
export function readAnswer(text: string, finishReason: string, plan: AnswerPlan, idPrefix: string): ChatAnswer {
  const reader = new AnswerReader(plan, idPrefix);
  const a = reader.push(text);
  const b = reader.flush();
  const content = a.content + b.content;
  const reasoning = a.reasoning + b.reasoning;
  const calls = [...a.calls, ...b.calls];
  const message: ChatAnswer["message"] = { role: "assistant", content: calls.length > 0 && content === "" ? null : content };
  if (calls.length > 0) message.tool_calls = calls;
  if (reasoning !== "") message.reasoning_content = reasoning;
  return { message, finishReason: calls.length > 0 && finishReason === "stop" ? "tool_calls" : finishReason };
}
