// Hermes-style tool calls, as Qwen2.5/Qwen3 and NousResearch Hermes write them and vLLM's
// `hermes` parser reads them: `<tool_call>\n{"name": "...", "arguments": {...}}\n</tool_call>`,
// several in a row separated by a newline. As in vLLM, the block's JSON must have a string
// `name` and an object `arguments`, returned as its JSON text. The newline Qwen's chat template
// writes before each call (after the content, between calls) belongs to the call's markup: the
// parsed content then renders back through the template to exactly the generated text.
import { ToolStreamBase } from "./buffered-stream.js";
import { jsonCall, parseJson } from "./scan.js";
import type { ToolCallParser, ToolParseStep } from "./tool-parser.js";

const OPEN = "<tool_call>";
const CLOSE = "</tool_call>";
/** Qwen's templates put this before every call but an answer's first when it has no content. */
const SEP = "\n";

/** Reads one answer in the Hermes format; each call is decided at its `</tool_call>`. */
class HermesToolStream extends ToolStreamBase {
  protected drain(final: boolean): ToolParseStep {
    return this.drainDelimited(final, { open: OPEN, close: CLOSE, separator: SEP }, (body) =>
      jsonCall(parseJson(body.trim()), this.opts.names, ["arguments"], this.nextId()),
    );
  }
}

/** The `hermes` parser (vLLM's `--tool-call-parser hermes`; Qwen2.5, Qwen3, Hermes 2/3). */
export function createHermesParser(): ToolCallParser {
  return {
    name: "hermes",
    contentWithCalls: true,
    stream: (opts) => new HermesToolStream(opts),
    prefill: (name) => (name === undefined ? `${OPEN}\n` : `${OPEN}\n{"name": ${JSON.stringify(name)}, "arguments": `),
    // As Qwen2.5's and Qwen3's chat templates write an assistant turn's calls after its content.
    format: (content, calls) =>
      content +
      calls
        .map((c, i) => `${i > 0 || content !== "" ? SEP : ""}${OPEN}\n{"name": ${JSON.stringify(c.name)}, "arguments": ${c.arguments}}\n${CLOSE}`)
        .join(""),
  };
}
