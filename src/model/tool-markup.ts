// OpenAI tool calling over a model's tool-call format (a parser from src/model/tool-parsers/: the
// tiny policy's markup `<|tool_call|>name {json}<|/tool_call|>` by default, or Hermes/Qwen, Llama 3
// JSON, Mistral) and its reasoning format (src/model/reasoning/): how a chat request's
// `tools`/`tool_choice` become a plan, how generated text becomes `content`, `tool_calls` and
// `reasoning_content`, and how earlier calls are written back as markup. Pure and dependency-free,
// so the built-in engine (which renders and answers) and the gateway's token path (which builds the
// answer from the engine's token ids) read the same output the same way.
import { TOOL_CALL_OPEN } from "./markup.js";
import type { ChatToolSpec } from "./chat-template.js";
import type { ReasoningParser, ReasoningStream } from "./reasoning/reasoning-parser.js";
import { ArborToolStream, createArborParser } from "./tool-parsers/arbor-parser.js";
import type { ParsedCall, ToolCallParser, ToolCallStream, ToolParseOptions } from "./tool-parsers/tool-parser.js";

/** One OpenAI tool call as an answer carries it. */
export type OpenAiToolCall = ParsedCall;

export type ToolCallFilterOptions = ToolParseOptions;

/**
 * A reader of one answer in the tiny policy's markup (the `arbor` parser's stream), constructible
 * directly as before the parsers existed. Text that may still become a call is held back until it
 * is decided; a call whose body is not `<declared name> <JSON object or nothing>` stays text.
 */
export type ToolCallFilter = ToolCallStream;
export const ToolCallFilter: new (opts: ToolCallFilterOptions) => ToolCallFilter = ArborToolStream;

/** The tiny policy's format: the default parser of a plan. */
const arborParser = createArborParser();

/** An assistant turn's tool calls in the policy's markup, after its text (how the policy wrote them). */
export function toolCallsAsMarkup(content: string, calls: readonly { function: { name: string; arguments: string } }[]): string {
  return arborParser.format(content, calls.map((c) => c.function));
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
   * written at the end of the prompt so the model can only continue a call: the parser's
   * `prefill` (with the arbor parser it starts with the `<|tool_call|>` control token).
   */
  prefill?: string;
  /** The model's tool-call format (default: the tiny policy's, `arbor`). */
  parser: ToolCallParser;
  /** The model's reasoning format, when it reasons (`<think>`); absent: no reasoning split. */
  reasoning?: ReasoningParser;
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

/**
 * The tool plan of a chat request (undefined without tools), reading calls with `parser` (default:
 * the tiny policy's markup) and reasoning with `reasoning`. Throws {@link ToolChoiceError}.
 */
export function planTools(body: ToolFields, parser: ToolCallParser = arborParser, reasoning?: ReasoningParser): ToolPlan | undefined {
  const tools = body.tools ?? [];
  const choice = body.tool_choice ?? "auto";
  if (tools.length === 0) {
    if (choice !== "auto" && choice !== "none") throw new ToolChoiceError("tool_choice", "requires tools");
    return undefined;
  }
  const specs = toolSpecs(tools);
  const plan: ToolPlan = { specs, parse: choice !== "none", single: body.parallel_tool_calls === false, parser, ...(reasoning ? { reasoning } : {}) };
  if (choice === "required") plan.prefill = parser.prefill();
  else if (typeof choice === "object") {
    const name = choice.function.name;
    if (!specs.some((s) => s.name === name)) throw new ToolChoiceError("tool_choice.function.name", `no tool named '${name}' in tools`);
    plan.prefill = parser.prefill(name);
  }
  return plan;
}

/**
 * The prefill's text after the tiny policy's `<|tool_call|>` marker, which the engine writes as its
 * control token (the rest is tokenized as plain text). Other formats' prefills are all text.
 */
export function prefillText(prefill: string): string {
  return prefill.startsWith(TOOL_CALL_OPEN) ? prefill.slice(TOOL_CALL_OPEN.length) : prefill;
}

/** Declared OpenAI tools as the chat template renders them. */
export function toolSpecs(tools: NonNullable<ToolFields["tools"]>): ChatToolSpec[] {
  return tools.map((t) => ({
    name: t.function.name,
    ...(t.function.description != null ? { description: t.function.description } : {}),
    ...(t.function.parameters != null ? { parameters: t.function.parameters } : {}),
  }));
}

/** The parser's stream reading one answer of `plan` (call ids `<idPrefix>_<n>`). */
export function toolCallFilter(plan: ToolPlan, idPrefix: string): ToolCallStream {
  return plan.parser.stream({
    names: new Set(plan.specs.map((s) => s.name)),
    idPrefix,
    single: plan.single,
    ...(plan.prefill !== undefined ? { prefill: plan.prefill } : {}),
  });
}

/** What one text delta of an answer yields: reasoning and content now safe to show, calls completed. */
export interface ChatAnswerStep {
  reasoning: string;
  content: string;
  calls: OpenAiToolCall[];
}

/**
 * Reads one chat answer as it arrives: the reasoning parser (if any) splits off the reasoning, and
 * the tool plan's parser (when it parses calls) reads calls out of the rest. A forced call's answer
 * starts with the call itself (the prefill ends the prompt), so it is not read for reasoning.
 */
export class ChatAnswerStream {
  private readonly reasoning: ReasoningStream | undefined;
  private readonly tools: ToolCallStream | undefined;

  constructor(plan: ToolPlan | undefined, idPrefix: string, reasoning?: ReasoningParser) {
    const parser = reasoning ?? plan?.reasoning;
    this.reasoning = parser && plan?.prefill === undefined ? parser.stream() : undefined;
    this.tools = plan?.parse ? toolCallFilter(plan, idPrefix) : undefined;
  }

  /** Calls found so far. */
  get callCount(): number {
    return this.tools?.callCount ?? 0;
  }

  push(text: string): ChatAnswerStep {
    const r = this.reasoning ? this.reasoning.push(text) : { reasoning: "", content: text };
    return this.read(r.reasoning, r.content, false);
  }

  /** The generation ended: everything held back. */
  flush(): ChatAnswerStep {
    const r = this.reasoning ? this.reasoning.flush() : { reasoning: "", content: "" };
    return this.read(r.reasoning, r.content, true);
  }

  private read(reasoning: string, text: string, final: boolean): ChatAnswerStep {
    if (!this.tools) return { reasoning, content: text, calls: [] };
    const got = this.tools.push(text);
    if (!final) return { reasoning, content: got.content, calls: got.calls };
    const rest = this.tools.flush();
    return { reasoning, content: got.content + rest.content, calls: [...got.calls, ...rest.calls] };
  }
}

/**
 * The `delta.tool_calls` entries of calls completed in one streamed chunk, as vLLM streams a call:
 * first its id, type and name (arguments ""), then its arguments, under the same index. The
 * `openai` client's stream helper adds these up to the non-streamed answer's `tool_calls`.
 */
export function toolCallDeltas(calls: readonly OpenAiToolCall[], firstIndex: number): Record<string, unknown>[] {
  return calls.flatMap((c, i) => [
    { index: firstIndex + i, id: c.id, type: "function", function: { name: c.function.name, arguments: "" } },
    { index: firstIndex + i, function: { arguments: c.function.arguments } },
  ]);
}

/** A chat answer's message with its tool calls and reasoning read out. */
export interface ToolCallAnswer {
  message: { role: "assistant"; content: string | null; tool_calls?: OpenAiToolCall[]; reasoning_content?: string };
  finishReason: string;
}

/**
 * A whole chat answer's message: the reasoning (with a reasoning parser, when there was any) as
 * `reasoning_content`, the text outside valid calls as `content` (null when the answer is only
 * calls), the calls as `tool_calls` (with a plan that parses them), and finish_reason "tool_calls"
 * for an answer with calls that stopped by itself. What the streamed chunks of the same answer add
 * up to. Works without tools too (`plan` undefined): the reasoning is still split off.
 */
export function chatAnswer(text: string, finishReason: string, plan: ToolPlan | undefined, idPrefix: string, reasoning?: ReasoningParser): ToolCallAnswer {
  const stream = new ChatAnswerStream(plan, idPrefix, reasoning);
  const got = stream.push(text);
  const rest = stream.flush();
  const calls = [...got.calls, ...rest.calls];
  const content = got.content + rest.content;
  const thought = got.reasoning + rest.reasoning;
  const withReasoning = thought !== "" ? { reasoning_content: thought } : {};
  if (calls.length === 0) return { message: { role: "assistant", content, ...withReasoning }, finishReason };
  return {
    message: { role: "assistant", content: content === "" ? null : content, tool_calls: calls, ...withReasoning },
    finishReason: finishReason === "stop" ? "tool_calls" : finishReason,
  };
}

/** {@link chatAnswer} of an answer to a request with tools (kept for the existing callers). */
export function toolCallAnswer(text: string, finishReason: string, plan: ToolPlan, idPrefix: string): ToolCallAnswer {
  return chatAnswer(text, finishReason, plan, idPrefix);
}
