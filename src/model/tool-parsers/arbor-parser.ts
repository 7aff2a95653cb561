// Arbor's tiny policy's tool-call markup: `<|tool_call|>name {json arguments}<|/tool_call|>`, the two
// markers being control tokens of its vocabulary (src/model/markup.ts). Arguments are kept as the
// policy wrote them (a JSON object, or nothing for `{}`).
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../markup.js";
import { ToolStreamBase } from "./buffered-stream.js";
import { isPlainObject, parseJson } from "./scan.js";
import type { ParsedCall, ToolCallParser, ToolParseStep } from "./tool-parser.js";

/** Reads one answer in Arbor's markup; calls are decided at their closing marker. */
export class ArborToolStream extends ToolStreamBase {
  protected drain(final: boolean): ToolParseStep {
    return this.drainDelimited(final, { open: TOOL_CALL_OPEN, close: TOOL_CALL_CLOSE }, (body) => this.toCall(body));
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
    return { id: this.nextId(), type: "function", function: { name, arguments: args } };
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
