// The reasoning parsers, as plain factories: `think` (`<think>…</think>`; vLLM's qwen3, and with
// startsInReasoning its deepseek_r1) and `none` (no reasoning). Every one passes
// reasoning-parser.contract.ts.
import { ArborError } from "../../core/errors.js";
import type { ReasoningParser, ReasoningParserOptions } from "./reasoning-parser.js";
import { createNoReasoningParser, createThinkParser } from "./think-parser.js";

const factories: Record<string, (opts: ReasoningParserOptions) => ReasoningParser> = {
  none: () => createNoReasoningParser(),
  think: (opts) => createThinkParser(opts),
};

export const reasoningParserRegistry = {
  /** The registered names, sorted. */
  names(): string[] {
    return Object.keys(factories).sort();
  },
  /** The parser called `name`; an unknown name is an error listing the known ones. */
  create(name: string, opts: ReasoningParserOptions = {}): ReasoningParser {
    const factory = Object.hasOwn(factories, name) ? factories[name] : undefined;
    if (!factory) throw new ArborError(`unknown reasoning parser '${name}' (known: ${reasoningParserRegistry.names().join(", ")})`, "config");
    return factory(opts);
  },
};
