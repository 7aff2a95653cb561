// Hermes-style tool calls, as Qwen2.5/Qwen3 and NousResearch Hermes write them and vLLM's
// `hermes` parser reads them: `<tool_call>\n{"name": "...", "arguments": {...}}\n</tool_call>`,
// several in a row separated by a newline. As in vLLM, the block's JSON must have a string
// `name` and an object `arguments`, returned as its JSON text. The newline Qwen's chat template
// writes before each call (after the content, between calls) belongs to the call's markup: the
// parsed content then renders back through the template to exactly the generated text.
import { heldPrefix, jsonCall, parseJson } from "./scan.js";
import type { ParsedCall, ToolCallParser, ToolCallStream, ToolParseOptions, ToolParseStep } from "./tool-parser.js";

const OPEN = "<tool_call>";
const CLOSE = "</tool_call>";
/** Qwen's templates put this before every call but an answer's first when it has no content. */
const SEP = "\n";

/** Reads one answer in the Hermes format; each call is decided at its `</tool_call>`. */
class HermesToolStream implements ToolCallStream {
  private buffer: string;
  private readonly calls: ParsedCall[] = [];

  constructor(private readonly opts: ToolParseOptions) {
    this.buffer = opts.prefill ?? "";
  }

  get callCount(): number {
    return this.calls.length;
  }

  push(text: string): ToolParseStep {
    this.buffer += text;
    return this.drain(false);
  }

  flush(): ToolParseStep {
    return this.drain(true);
  }

  private drain(final: boolean): ToolParseStep {
    let content = "";
    const calls: ParsedCall[] = [];
    for (;;) {
      const parsing = !(this.opts.single === true && this.calls.length > 0);
      const open = parsing ? this.buffer.indexOf(OPEN) : -1;
      if (open < 0) {
        const keep = final || !parsing ? 0 : heldPrefix(this.buffer, SEP + OPEN, OPEN);
        content += this.buffer.slice(0, this.buffer.length - keep);
        this.buffer = this.buffer.slice(this.buffer.length - keep);
        break;
      }
      const start = open > 0 && this.buffer.endsWith(SEP, open) ? open - SEP.length : open;
      content += this.buffer.slice(0, start);
      this.buffer = this.buffer.slice(start);
      const bodyStart = open - start + OPEN.length;
      const close = this.buffer.indexOf(CLOSE, bodyStart);
      if (close < 0) {
        if (final) {
          content += this.buffer;
          this.buffer = "";
        }
        break;
      }
      const whole = this.buffer.slice(0, close + CLOSE.length);
      this.buffer = this.buffer.slice(whole.length);
      const call = jsonCall(parseJson(whole.slice(bodyStart, close).trim()), this.opts.names, ["arguments"], `${this.opts.idPrefix}_${this.calls.length}`);
      if (call) {
        this.calls.push(call);
        calls.push(call);
      } else {
        content += whole;
      }
    }
    return { content, calls };
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
