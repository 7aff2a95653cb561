// The tool-call and reasoning parsers a backend's answers are read with, by the names a config
// gives them (`backends[].toolParser`, `backends[].reasoningParser`). Stand-in until the model
// layer's parser registries (src/model/tool-parsers/registry.ts: hermes, llama3_json, mistral,
// arbor; the `think` reasoning parser) land: it knows Arbor's markup (the behaviour the engine and
// the token path share today, model/tool-markup.ts) and `<think>…</think>`; the lookups below are
// the one place that then delegates to those registries.
import { ArborError } from "../core/errors.js";
import { TOOL_CALL_OPEN } from "../model/markup.js";
import { ToolCallFilter, toolCallsAsMarkup } from "../model/tool-markup.js";
import type { ToolCallParser } from "../model/tool-parsers/tool-parser.js";
import type { ReasoningParser, ReasoningSplit } from "./backend.js";

/** Arbor's tiny policy's markup, `<|tool_call|>name {json}<|/tool_call|>`, read as the engine reads it. */
const arborToolParser: ToolCallParser = {
  name: "arbor",
  stream: (opts) => new ToolCallFilter(opts),
  prefill: (name) => (name === undefined ? TOOL_CALL_OPEN : `${TOOL_CALL_OPEN}${name} `),
  format: (content, calls) => toolCallsAsMarkup(content, calls.map((c) => ({ function: c }))),
};

const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";

/**
 * `<think>…</think>` at the start of an answer is its reasoning, the rest its content (vLLM's
 * deepseek_r1/qwen3 reasoning parsers: the text between the tags, unstripped). An answer that does
 * not start with `<think>` has no reasoning; one that never closes it is all reasoning.
 */
const thinkReasoningParser: ReasoningParser = {
  name: "think",
  stream() {
    let state: "start" | "reasoning" | "content" = "start";
    let buffer = "";
    const drain = (final: boolean): ReasoningSplit => {
      const out: ReasoningSplit = { reasoning: "", content: "" };
      if (state === "start") {
        if (buffer.startsWith(THINK_OPEN)) {
          buffer = buffer.slice(THINK_OPEN.length);
          state = "reasoning";
        } else if (!final && THINK_OPEN.startsWith(buffer)) {
          return out; // may still become `<think>`
        } else {
          state = "content";
        }
      }
      if (state === "reasoning") {
        const close = buffer.indexOf(THINK_CLOSE);
        if (close < 0) {
          const keep = final ? 0 : heldPrefix(buffer, THINK_CLOSE);
          out.reasoning = buffer.slice(0, buffer.length - keep);
          buffer = buffer.slice(buffer.length - keep);
          return out;
        }
        out.reasoning = buffer.slice(0, close);
        buffer = buffer.slice(close + THINK_CLOSE.length);
        state = "content";
      }
      out.content = buffer;
      buffer = "";
      return out;
    };
    return { push: (text) => ((buffer += text), drain(false)), flush: () => drain(true) };
  },
};

/** Longest suffix of `text` that is a proper prefix of `marker`. */
function heldPrefix(text: string, marker: string): number {
  for (let n = Math.min(marker.length - 1, text.length); n > 0; n--) {
    if (text.endsWith(marker.slice(0, n))) return n;
  }
  return 0;
}

const toolParsers: Record<string, ToolCallParser> = { arbor: arborToolParser };
const reasoningParsers: Record<string, ReasoningParser> = { think: thinkReasoningParser };

/** Names {@link toolParserNamed} knows. */
export const toolParserNames: readonly string[] = Object.keys(toolParsers);
/** Names {@link reasoningParserNamed} knows. */
export const reasoningParserNames: readonly string[] = Object.keys(reasoningParsers);

/** The tool-call parser called `name`; `where` names the config field in the error for an unknown one. */
export function toolParserNamed(name: string, where: string): ToolCallParser {
  const p = Object.hasOwn(toolParsers, name) ? toolParsers[name] : undefined;
  if (!p) throw new ArborError(`${where}: unknown tool parser '${name}' (known: ${toolParserNames.join(", ")})`, "config");
  return p;
}

/** The reasoning parser called `name`; `where` names the config field in the error for an unknown one. */
export function reasoningParserNamed(name: string, where: string): ReasoningParser {
  const p = Object.hasOwn(reasoningParsers, name) ? reasoningParsers[name] : undefined;
  if (!p) throw new ArborError(`${where}: unknown reasoning parser '${name}' (known: ${reasoningParserNames.join(", ")})`, "config");
  return p;
}
