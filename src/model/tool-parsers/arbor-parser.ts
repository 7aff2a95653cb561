// Arbor's tiny policy's tool-call markup: `<|tool_call|>name {json arguments}<|/tool_call|>`, the two
// markers being control tokens of its vocabulary (src/model/markup.ts). Arguments are kept as the
// policy wrote them (a JSON object, or nothing for `{}`).
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../markup.js";
import { heldPrefix, isPlainObject, parseJson } from "./scan.js";
import type { ParsedCall, ToolCallParser, ToolCallStream, ToolParseOptions, ToolParseStep } from "./tool-parser.js";

/** Reads one answer in Arbor's markup; calls are decided at their closing marker. */
export class ArborToolStream implements ToolCallStream {
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
      const open = parsing ? this.buffer.indexOf(TOOL_CALL_OPEN) : -1;
      if (open < 0) {
        const keep = final || !parsing ? 0 : heldPrefix(this.buffer, TOOL_CALL_OPEN);
        content += this.buffer.slice(0, this.buffer.length - keep);
        this.buffer = this.buffer.slice(this.buffer.length - keep);
        break;
      }
      content += this.buffer.slice(0, open);
      this.buffer = this.buffer.slice(open);
      const close = this.buffer.indexOf(TOOL_CALL_CLOSE, TOOL_CALL_OPEN.length);
      if (close < 0) {
        if (final) {
          content += this.buffer;
          this.buffer = "";
        }
        break;
      }
      const whole = this.buffer.slice(0, close + TOOL_CALL_CLOSE.length);
      this.buffer = this.buffer.slice(whole.length);
      const call = this.toCall(whole.slice(TOOL_CALL_OPEN.length, close));
      if (call) {
        this.calls.push(call);
        calls.push(call);
      } else {
        content += whole;
      }
    }
    return { content, calls };
  }

  /** `<declared name> <JSON object or nothing>`, else not a call. */
  private toCall(body: string): ParsedCall | undefined {
    const m = /^\s*([A-Za-z_][\w-]*)(?:\s([\s\S]*))?$/.exec(body);
    if (!m) return undefined;
    const name = m[1] as string;
    if (!this.opts.names.has(name)) return undefined;
    const input = (m[2] ?? "").trim();
    const args = input === "" ? "{}" : input;
    if (!isPlainObject(parseJson(args))) return undefined;
    return { id: `${this.opts.idPrefix}_${this.calls.length}`, type: "function", function: { name, arguments: args } };
  }
}

/** The `arbor` parser. */
export function createArborParser(): ToolCallParser {
  return {
    name: "arbor",
    contentWithCalls: true,
    stream: (opts) => new ArborToolStream(opts),
    prefill: (name) => (name === undefined ? TOOL_CALL_OPEN : `${TOOL_CALL_OPEN}${name} `),
    format: (content, calls) => content + calls.map((c) => `${TOOL_CALL_OPEN}${c.name} ${c.arguments}${TOOL_CALL_CLOSE}`).join(""),
  };
}
