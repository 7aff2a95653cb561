// The contract of a reasoning parser: how a model family marks its reasoning in the output text
// (`<think>…</think>` for Qwen3, DeepSeek-R1, QwQ), read incrementally so that streamed deltas and
// the whole answer split the same way into `reasoning_content` and `content`. Parsers are plain
// factories in registry.ts; every one passes reasoning-parser.contract.ts.

/** What one pushed text delta yields: reasoning and content now safe to show. */
export interface ReasoningStep {
  reasoning: string;
  content: string;
}

/** Reads one answer; text that may still be a tag is held back until decided. */
export interface ReasoningStream {
  push(text: string): ReasoningStep;
  /** The generation ended: everything held back. */
  flush(): ReasoningStep;
}

export interface ReasoningParserOptions {
  /**
   * The chat template's generation prompt already opened the reasoning (`<think>` at the end of
   * the prompt, as Qwen3-Thinking's and DeepSeek-R1's do): the answer starts inside it and only
   * closes it; an answer that never closes it is all reasoning.
   */
  startsInReasoning?: boolean;
}

/** A model family's reasoning format, configured for one template. */
export interface ReasoningParser {
  /** Registry name (`think`, `none`). */
  readonly name: string;
  readonly startsInReasoning: boolean;
  /**
   * The texts that open and close the reasoning (`<think>`, `</think>`), which the gateway finds as
   * token ids to count the reasoning's tokens (reasoning-tokens.ts); absent where the parser marks none.
   */
  readonly markers?: { open: string; close: string };
  /** A reader for one answer. */
  stream(): ReasoningStream;
  /** How an answer with this reasoning and content reads (golden data, scripted models). */
  format(reasoning: string, content: string): string;
}
