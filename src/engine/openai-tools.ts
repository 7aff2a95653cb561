// OpenAI tool calling on the built-in engine: the tiny policy writes tool calls in its own markup
// (`<|tool_call|>name {json arguments}<|/tool_call|>`, src/agents/markup.ts); when a chat request
// declares `tools`, the engine renders them into the prompt (forcing a call's opening for
// tool_choice "required"/named), turns valid calls in the output into OpenAI `tool_calls` (plain
// and streamed alike, through the same filter) and renders earlier calls back into the markup.
// The markup logic itself lives in src/model/tool-markup.ts (over the parsers of
// src/model/tool-parsers/ and src/model/reasoning/), shared with the gateway's token path.
import type { ReasoningParser } from "../model/reasoning/reasoning-parser.js";
import { reasoningParserRegistry } from "../model/reasoning/registry.js";
import { toolParserRegistry } from "../model/tool-parsers/registry.js";
import type { ToolCallParser } from "../model/tool-parsers/tool-parser.js";
import { planTools, toolCallDeltas, ToolChoiceError, type OpenAiToolCall, type ToolFields, type ToolPlan } from "../model/tool-markup.js";
import { invalidRequest } from "./openai-errors.js";

export {
  chatAnswer,
  ChatAnswerStream,
  ToolCallFilter,
  toolCallAnswer,
  toolCallFilter,
  toolCallsAsMarkup,
  toolSpecs,
  type OpenAiToolCall,
  type ToolCallFilterOptions,
  type ToolPlan,
} from "../model/tool-markup.js";

type ChunkChoice = { delta?: { content?: unknown; tool_calls?: unknown; reasoning_content?: unknown }; finish_reason?: unknown };

/** What a chunk filter reads an answer with: a tool-call parser's stream, or a {@link ChatAnswerStream} (reasoning too). */
export interface AnswerReader {
  readonly callCount: number;
  push(text: string): { content: string; calls: OpenAiToolCall[]; reasoning?: string };
  flush(): { content: string; calls: OpenAiToolCall[]; reasoning?: string };
}

/**
 * Applies an answer reader to streamed chat chunks in place: content deltas lose what the reader
 * holds back, reasoning goes out as `delta.reasoning_content`, completed calls as `delta.tool_calls`
 * the way vLLM streams them (id, type and name with arguments "", then the arguments, same index),
 * and the final chunk flushes the rest and reports finish_reason "tool_calls" when the answer made
 * calls and stopped by itself. Token ids and logprobs are left as they are: the trace of every
 * token still flows.
 */
export function filterToolCallChunk(filter: AnswerReader, chunk: Record<string, unknown>): Record<string, unknown> {
  const choices = chunk.choices as ChunkChoice[] | undefined;
  const choice = choices?.[0];
  if (!choice?.delta) return chunk;
  const text = typeof choice.delta.content === "string" ? choice.delta.content : "";
  const final = choice.finish_reason !== null && choice.finish_reason !== undefined;
  const got = filter.push(text);
  const rest = final ? filter.flush() : { content: "", calls: [], reasoning: "" };
  const before = filter.callCount - got.calls.length - rest.calls.length;
  const calls = [...got.calls, ...rest.calls];
  const delta: Record<string, unknown> = { ...choice.delta, content: got.content + rest.content };
  // Only when there is some: the openai client's stream helper keeps the last value it saw.
  const reasoning = (got.reasoning ?? "") + (rest.reasoning ?? "");
  if (reasoning !== "") delta.reasoning_content = reasoning;
  if (calls.length > 0) delta.tool_calls = toolCallDeltas(calls, before);
  const out: ChunkChoice = { ...choice, delta };
  if (final && choice.finish_reason === "stop" && filter.callCount > 0) out.finish_reason = "tool_calls";
  return { ...chunk, choices: [out, ...(choices ?? []).slice(1)] };
}

/**
 * How a served model writes tool calls and reasoning, by registry name (src/model/tool-parsers/,
 * src/model/reasoning/): the model family's formats, e.g. `hermes` + `think` for Qwen3. Defaults:
 * the tiny policy's markup and no reasoning.
 */
export interface ModelFormats {
  toolParser?: string;
  reasoningParser?: string;
  /** The chat template's generation prompt opens `<think>` (see ReasoningParserOptions). */
  startsInReasoning?: boolean;
}

/** The parsers of `formats`; an unknown name is an error listing the known ones. */
export function modelParsers(formats: ModelFormats = {}): { parser: ToolCallParser; reasoning: ReasoningParser | undefined } {
  const reasoning =
    formats.reasoningParser !== undefined && formats.reasoningParser !== "none"
      ? reasoningParserRegistry.create(formats.reasoningParser, { startsInReasoning: formats.startsInReasoning === true })
      : undefined;
  return { parser: toolParserRegistry.create(formats.toolParser ?? "arbor"), reasoning };
}

/** The tool plan of a chat request (undefined without tools) in the model's formats; 400 for a tool_choice the tools cannot satisfy. */
export function toolPlan(body: ToolFields, formats: ModelFormats = {}): ToolPlan | undefined {
  const { parser, reasoning } = modelParsers(formats);
  try {
    return planTools(body, parser, reasoning);
  } catch (e) {
    if (e instanceof ToolChoiceError) throw invalidRequest(e.field, e.reason);
    throw e;
  }
}

/** A chat request's prompt ids and the tool plan its answer is read with. */
export interface ChatPrompt {
  prompt: number[];
  tools: ToolPlan | undefined;
}
