// `<think>…</think>` reasoning as vLLM's `qwen3` and `deepseek_r1` reasoning parsers split it. An
// answer that opens with `<think>` reasons until `</think>` and the rest is content; an answer that
// does not is all content (qwen3), unless the generation prompt already opened the reasoning
// (startsInReasoning, deepseek_r1): then it reasons until `</think>` (a leading `<think>` is
// dropped) and without one it is all reasoning. A reasoning cut off before `</think>` (max_tokens)
// stays reasoning, as vLLM streams it, so streamed deltas and the whole answer always agree. Text
// is kept as generated (the newlines around the tags included), as vLLM returns it.
import { BufferedStream } from "../tool-parsers/buffered-stream.js";
import { heldPrefix } from "../tool-parsers/scan.js";
import type { ReasoningParser, ReasoningParserOptions, ReasoningStep, ReasoningStream } from "./reasoning-parser.js";

const OPEN = "<think>";
const CLOSE = "</think>";

class ThinkStream extends BufferedStream<ReasoningStep> implements ReasoningStream {
  private phase: "start" | "reasoning" | "content" = "start";

  constructor(private readonly startsInReasoning: boolean) {
    super();
  }

  protected drain(final: boolean): ReasoningStep {
    let reasoning = "";
    let content = "";
    if (this.phase === "start") {
      if (this.buffer.startsWith(OPEN)) {
        this.buffer = this.buffer.slice(OPEN.length);
        this.phase = "reasoning";
      } else if (!final && OPEN.startsWith(this.buffer)) {
        return { reasoning, content }; // may still become `<think>`
      } else {
        this.phase = this.startsInReasoning ? "reasoning" : "content";
      }
    }
    if (this.phase === "reasoning") {
      const close = this.buffer.indexOf(CLOSE);
      if (close < 0) {
        const keep = final ? 0 : heldPrefix(this.buffer, CLOSE);
        reasoning = this.buffer.slice(0, this.buffer.length - keep);
        this.buffer = this.buffer.slice(this.buffer.length - keep);
        return { reasoning, content };
      }
      reasoning = this.buffer.slice(0, close);
      this.buffer = this.buffer.slice(close + CLOSE.length);
      this.phase = "content";
    }
    content = this.buffer;
    this.buffer = "";
    return { reasoning, content };
  }
}

/** The `think` parser. */
export function createThinkParser(opts: ReasoningParserOptions = {}): ReasoningParser {
  const startsInReasoning = opts.startsInReasoning === true;
  return {
    name: "think",
    startsInReasoning,
    markers: { open: OPEN, close: CLOSE },
    stream: () => new ThinkStream(startsInReasoning),
    format: (reasoning, content) => (startsInReasoning ? `${reasoning}${CLOSE}${content}` : `${OPEN}${reasoning}${CLOSE}${content}`),
  };
}

/** The `none` parser: the whole answer is content. */
export function createNoReasoningParser(): ReasoningParser {
  return {
    name: "none",
    startsInReasoning: false,
    stream: () => ({ push: (text) => ({ reasoning: "", content: text }), flush: () => ({ reasoning: "", content: "" }) }),
    format: (reasoning, content) => {
      if (reasoning !== "") throw new Error("reasoning parser 'none': an answer has no reasoning");
      return content;
    },
  };
}
