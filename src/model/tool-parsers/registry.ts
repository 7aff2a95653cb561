// The tool-call parsers by model family, as plain factories: `arbor` (the tiny policy's markup, the
// default), `hermes` (Qwen2.5/Qwen3/Hermes), `llama3_json` (Llama 3.x) and `mistral` (pre-v11
// Mistral). Names follow vLLM's `--tool-call-parser` where one exists, so a config can say the
// same name to Arbor's engine, the gateway and vLLM. Every parser passes tool-parser.contract.ts.
import { ArborError } from "../../core/errors.js";
import { createArborParser } from "./arbor-parser.js";
import { createHermesParser } from "./hermes-parser.js";
import { createLlama3JsonParser } from "./llama3-json-parser.js";
import { createMistralParser } from "./mistral-parser.js";
import type { ToolCallParser } from "./tool-parser.js";

const factories: Record<string, () => ToolCallParser> = {
  arbor: createArborParser,
  hermes: createHermesParser,
  llama3_json: createLlama3JsonParser,
  mistral: createMistralParser,
};

export const toolParserRegistry = {
  /** The registered names, sorted. */
  names(): string[] {
    return Object.keys(factories).sort();
  },
  /** The parser called `name`; an unknown name is an error listing the known ones. */
  create(name: string): ToolCallParser {
    const factory = Object.hasOwn(factories, name) ? factories[name] : undefined;
    if (!factory) throw new ArborError(`unknown tool-call parser '${name}' (known: ${toolParserRegistry.names().join(", ")})`, "config");
    return factory();
  },
};
