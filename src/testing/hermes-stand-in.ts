// A Hermes/Qwen tool-call parser for the gateway's tests (`<tool_call>\n{"name": ..., "arguments":
// {...}}\n</tool_call>`, as vLLM's hermes_tool_parser reads it), with one difference that matters
// for token-in/token-out: whitespace that separates content from a call, and calls from each other
// (the "\n" Qwen's templates write there, or Qwen3's "\n\n" after `</think>`), is not content — so
// an answer sent back re-renders to the model's own text. Whitespace is held back while streaming
// until it is known not to precede a call. Test support only: a stand-in until the model layer's
// registry (src/model/tool-parsers/, helper A) lands; then tests take its `hermes`.
import type { ParsedCall, ToolCallParser, ToolCallStream, ToolParseOptions, ToolParseStep } from "../model/tool-parsers/tool-parser.js";

const OPEN = "<tool_call>";
const CLOSE = "</tool_call>";

/** The stand-in parser. */
export const hermesStandIn: ToolCallParser = {
  name: "hermes",
  stream: (opts) => new HermesStream(opts),
  prefill: (name) => (name === undefined ? `${OPEN}\n` : `${OPEN}\n{"name": ${JSON.stringify(name)}, "arguments": `),
  format: (content, calls) => content + calls.map((c) => `${content === "" && c === calls[0] ? "" : "\n"}${OPEN}\n{"name": ${JSON.stringify(c.name)}, "arguments": ${c.arguments}}\n${CLOSE}`).join(""),
};

class HermesStream implements ToolCallStream {
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
        // Held: the start of a marker, and (while a call may follow) trailing whitespace.
        let keep = final || !parsing ? 0 : held(this.buffer, OPEN);
        if (!final && parsing) keep = Math.max(keep, this.buffer.length - this.buffer.trimEnd().length);
        content += this.visible(this.buffer.slice(0, this.buffer.length - keep));
        this.buffer = this.buffer.slice(this.buffer.length - keep);
        return { content, calls };
      }
      // Whitespace right before a call separates it from the content.
      content += this.visible(this.buffer.slice(0, open).trimEnd());
      this.buffer = this.buffer.slice(open);
      const close = this.buffer.indexOf(CLOSE);
      if (close < 0) {
        if (final) {
          content += this.buffer;
          this.buffer = "";
        }
        return { content, calls };
      }
      const whole = this.buffer.slice(0, close + CLOSE.length);
      this.buffer = this.buffer.slice(whole.length);
      const call = this.toCall(whole.slice(OPEN.length, close));
      if (call) {
        this.calls.push(call);
        calls.push(call);
      } else {
        content += whole;
      }
    }
  }

  /** Text outside calls: after the first call, whitespace is the calls' separator, not content. */
  private visible(text: string): string {
    return this.calls.length > 0 && text.trim() === "" ? "" : text;
  }

  private toCall(body: string): ParsedCall | undefined {
    try {
      const v = JSON.parse(body) as { name?: unknown; arguments?: unknown };
      if (typeof v !== "object" || v === null || typeof v.name !== "string" || !this.opts.names.has(v.name)) return undefined;
      const args = v.arguments ?? {};
      if (typeof args !== "object" || args === null || Array.isArray(args)) return undefined;
      return { id: `${this.opts.idPrefix}_${this.calls.length}`, type: "function", function: { name: v.name, arguments: JSON.stringify(args) } };
    } catch {
      return undefined;
    }
  }
}

function held(text: string, marker: string): number {
  for (let n = Math.min(marker.length - 1, text.length); n > 0; n--) {
    if (text.endsWith(marker.slice(0, n))) return n;
  }
  return 0;
}
