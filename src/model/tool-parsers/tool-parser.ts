// The contract of a tool-call parser: how one model family writes tool calls in its output text
// (Hermes/Qwen `<tool_call>{json}</tool_call>`, Llama 3.x JSON, Mistral `[TOOL_CALLS]`, Arbor's
// markup), read incrementally so streamed deltas and the whole answer agree. Parsers are plain
// factories in registry.ts; every one passes tool-parser.contract.ts.

/** One OpenAI tool call as an answer carries it. */
export interface ParsedCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface ToolParseOptions {
  /** Declared tool names; a call to any other name stays text. */
  names: ReadonlySet<string>;
  /** Prefix of the call ids (`<prefix>_<n>`); unique per answer. */
  idPrefix: string;
  /** `parallel_tool_calls: false`: calls after the first stay text. */
  single?: boolean;
  /** Text the answer is known to start with but the model did not generate (a forced call's opening). */
  prefill?: string;
}

/** What one pushed text delta yields: content now safe to show and calls completed by it. */
export interface ToolParseStep {
  content: string;
  calls: ParsedCall[];
}

/**
 * Reads one answer. Text that may still become a call is held back until decided, so streamed
 * deltas never show markup that the whole answer turns into a call; a malformed call stays text,
 * markup included: nothing is dropped.
 */
export interface ToolCallStream {
  /** Calls found so far. */
  readonly callCount: number;
  push(text: string): ToolParseStep;
  /** The generation ended: everything held back (an unclosed call stays text). */
  flush(): ToolParseStep;
}

/** A model family's tool-call format. */
export interface ToolCallParser {
  /** Registry name (vLLM's `--tool-call-parser` names where one exists: hermes, llama3_json, mistral). */
  readonly name: string;
  /**
   * Whether an assistant turn can carry text beside its calls. Llama 3's JSON calls are the whole
   * answer (its template drops the content of a turn with calls), so `format` refuses content there.
   */
  readonly contentWithCalls: boolean;
  /** A reader for one answer. */
  stream(opts: ToolParseOptions): ToolCallStream;
  /**
   * The text a forced call's answer starts with (tool_choice "required": any tool; a named
   * function: that one), written at the end of the prompt so the model can only continue a call.
   */
  prefill(name?: string): string;
  /**
   * The id of call `n` of an answer whose ids start with `idPrefix`, when the family's templates
   * constrain ids (Mistral: 9 alphanumerics); absent: `<idPrefix>_<n>`.
   */
  callId?(idPrefix: string, n: number): string;
  /** How an assistant turn with these calls reads in this format (golden data, scripted models). */
  format(content: string, calls: readonly { name: string; arguments: string }[]): string;
}
