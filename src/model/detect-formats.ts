// Which tool-call and reasoning parsers a model's chat template implies, for engines whose config
// names none: a template that writes Hermes `<tool_call>` blocks (Qwen2.5, Qwen3, Hermes), Llama 3.x
// `<|python_tag|>`/`ipython` tool turns, or Mistral's `[TOOL_CALLS]` tells how the model was trained
// to call tools, and `<think>` that it reasons first. vLLM makes users name them
// (`--tool-call-parser`); Arbor reads the template, and an explicit config still wins.

/** Registry names of a model's parsers (src/model/tool-parsers/, src/model/reasoning/). */
export interface DetectedFormats {
  /** Absent: the template shows no known tool-call format (Arbor's markup is then the fallback). */
  toolParser?: string;
  reasoningParser?: string;
}

/** The formats `template` implies (see the file header); none for an absent template. */
export function detectFormats(template: string | undefined): DetectedFormats {
  if (template === undefined) return {};
  const out: DetectedFormats = {};
  if (template.includes("<tool_call>")) out.toolParser = "hermes";
  else if (template.includes("[TOOL_CALLS]")) out.toolParser = "mistral";
  else if (template.includes("<|python_tag|>") || template.includes("ipython")) out.toolParser = "llama3_json";
  if (template.includes("<think>")) out.reasoningParser = "think";
  return out;
}
