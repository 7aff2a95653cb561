// The tool-call and reasoning parsers a backend's answers are read with, by the names a config
// gives them (`backends[].toolParser`, `backends[].reasoningParser`): the model layer's registries
// (src/model/tool-parsers/registry.ts: arbor, hermes, llama3_json, mistral; src/model/reasoning/:
// think, none), with errors that name the config field.
import { ArborError } from "../core/errors.js";
import { reasoningParserRegistry } from "../model/reasoning/registry.js";
import type { ReasoningParser } from "../model/reasoning/reasoning-parser.js";
import { toolParserRegistry } from "../model/tool-parsers/registry.js";
import type { ToolCallParser } from "../model/tool-parsers/tool-parser.js";

/** The tool-call parser called `name`; `where` names the config field in the error for an unknown one. */
export function toolParserNamed(name: string, where: string): ToolCallParser {
  if (!toolParserRegistry.names().includes(name)) {
    throw new ArborError(`${where}: unknown tool parser '${name}' (known: ${toolParserRegistry.names().join(", ")})`, "config");
  }
  return toolParserRegistry.create(name);
}

/** The reasoning parser called `name`; `where` names the config field in the error for an unknown one. */
export function reasoningParserNamed(name: string, where: string): ReasoningParser {
  if (!reasoningParserRegistry.names().includes(name)) {
    throw new ArborError(`${where}: unknown reasoning parser '${name}' (known: ${reasoningParserRegistry.names().join(", ")})`, "config");
  }
  return reasoningParserRegistry.create(name);
}
