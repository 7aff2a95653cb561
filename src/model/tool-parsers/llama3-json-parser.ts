// Llama 3.1/3.2/3.3 JSON tool calls, as vLLM's `llama3_json` parser reads them: the answer itself is
// the call, `{"name": ..., "parameters": {...}}` (`"arguments"` accepted too), optionally after
// `<|python_tag|>`, several separated by `;`. Only an answer that starts with a call (after
// whitespace) has calls, as in vLLM; each call is decided when its object closes, and whatever
// follows that is not `; {another call}` stays text. Llama's template drops the content of a turn
// with calls, so such a turn has none.
import { ToolStreamBase } from "./buffered-stream.js";
import { heldPrefix, jsonCall, jsonEnd, parseJson, skipSpace } from "./scan.js";
import type { ToolCallParser, ToolParseStep } from "./tool-parser.js";

const PYTHON_TAG = "<|python_tag|>";
const ARGS_KEYS = ["parameters", "arguments"] as const;

/** Reads one answer in Llama 3's JSON format. */
class Llama3JsonToolStream extends ToolStreamBase {
  /** "start": nothing decided yet; "calls": after a call; "text": the rest is content. */
  private phase: "start" | "calls" | "text" = "start";

  protected drain(final: boolean): ToolParseStep {
    const step: ToolParseStep = { content: "", calls: [] };
    for (;;) {
      if (this.phase === "text") break;
      if (this.phase === "calls" && this.opts.single === true) {
        this.phase = "text";
        break;
      }
      const at = this.callStart();
      if (at === "wait") {
        if (final) this.phase = "text";
        break;
      }
      if (at === "no") {
        this.phase = "text";
        break;
      }
      const end = jsonEnd(this.buffer, at);
      if (end < 0) {
        if (final) this.phase = "text";
        break;
      }
      const call = jsonCall(parseJson(this.buffer.slice(at, end)), this.opts.names, ARGS_KEYS, this.nextId());
      if (!call) {
        this.phase = "text";
        break;
      }
      this.accept(call, step);
      this.buffer = this.buffer.slice(end);
      this.phase = "calls";
    }
    if (this.phase === "text") this.emit(this.buffer.length, step);
    return step;
  }

  /** Where the next call's object opens, "wait" when the text so far cannot tell, "no" when there is none. */
  private callStart(): number | "wait" | "no" {
    const b = this.buffer;
    let i = skipSpace(b, 0);
    if (this.phase === "calls") {
      if (i === b.length) return "wait";
      if (b[i] !== ";") return "no";
      i = skipSpace(b, i + 1);
    } else if (b.startsWith(PYTHON_TAG, i)) {
      i = skipSpace(b, i + PYTHON_TAG.length);
    } else if (i < b.length && heldPrefix(b, PYTHON_TAG) === b.length - i) {
      return "wait";
    }
    if (i === b.length) return "wait";
    return b[i] === "{" ? i : "no";
  }
}

/** The `llama3_json` parser (vLLM's `--tool-call-parser llama3_json`). */
export function createLlama3JsonParser(): ToolCallParser {
  return {
    name: "llama3_json",
    contentWithCalls: false,
    stream: (opts) => new Llama3JsonToolStream(opts),
    prefill: (name) => `{"name": ${name === undefined ? '"' : `${JSON.stringify(name)}, "parameters": `}`,
    // As Llama 3.1's chat template writes a call (it allows one per turn; vLLM reads `; `-separated ones).
    format: (content, calls) => {
      if (calls.length === 0) return content;
      if (content !== "") throw new Error("llama3_json: an assistant turn with tool calls has no content (Llama 3's chat template drops it)");
      return calls.map((c) => `{"name": ${JSON.stringify(c.name)}, "parameters": ${c.arguments}}`).join("; ");
    },
  };
}
