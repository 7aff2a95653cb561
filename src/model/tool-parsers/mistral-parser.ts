// Mistral's tool calls before tokenizer v11 (Mistral 7B v0.3, Mixtral 8x22B, Mistral Nemo), as
// vLLM's `mistral` parser reads them: `[TOOL_CALLS]` then a JSON array of
// `{"name": ..., "arguments": {...}}`, after any content. The chat template writes `[TOOL_CALLS] [`
// (the space is the SentencePiece word start), so whitespace after the marker is accepted.
import { createHash } from "node:crypto";
import { ToolStreamBase } from "./buffered-stream.js";
import { arrayElementSpans, heldPrefix, jsonCall, jsonEnd, parseJson, skipSpace } from "./scan.js";
import type { ParsedCall, ToolCallParser, ToolParseStep } from "./tool-parser.js";

const MARK = "[TOOL_CALLS]";

const ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/**
 * A call id as Mistral's templates require it: 9 characters of [a-zA-Z0-9] (the template raises an
 * exception otherwise; vLLM's MistralToolCall draws them at random). Derived from the answer's id
 * prefix and the call's index, so ids are unique per answer and reproducible.
 */
export function mistralCallId(idPrefix: string, n: number): string {
  const digest = createHash("sha256").update(`${idPrefix}_${n}`).digest();
  let id = "";
  for (let i = 0; i < 9; i++) id += ALNUM[(digest[i] as number) % ALNUM.length];
  return id;
}

/** Reads one answer in Mistral's format; a call block is decided when its array closes. */
class MistralToolStream extends ToolStreamBase {
  protected override nextId(offset = 0): string {
    return mistralCallId(this.opts.idPrefix, this.callCount + offset);
  }

  protected drain(final: boolean): ToolParseStep {
    const step: ToolParseStep = { content: "", calls: [] };
    const emit = (n: number): void => this.emit(n, step);
    for (;;) {
      const parsing = this.parsing;
      const open = parsing ? this.buffer.indexOf(MARK) : -1;
      if (open < 0) {
        emit(this.buffer.length - (final || !parsing ? 0 : heldPrefix(this.buffer, MARK)));
        break;
      }
      emit(open);
      const start = skipSpace(this.buffer, MARK.length);
      if (start === this.buffer.length) {
        if (final) emit(this.buffer.length);
        break;
      }
      if (this.buffer[start] !== "[") {
        emit(MARK.length); // not a call block: the marker is text, and the search goes on after it
        continue;
      }
      const end = jsonEnd(this.buffer, start);
      if (end < 0) {
        if (final) emit(this.buffer.length);
        break;
      }
      const block = this.buffer.slice(start, end);
      const found = this.toCalls(block);
      if (!found) {
        emit(end);
        continue;
      }
      this.buffer = this.buffer.slice(end);
      // parallel_tool_calls false: the block's later calls stay text, as written.
      const keep = this.opts.single === true ? 1 : found.length;
      for (const call of found.slice(0, keep)) this.accept(call, step);
      if (keep < found.length) step.content += block.slice(arrayElementSpans(block)[0]?.end);
    }
    return step;
  }

  /** Every element of the array a call of a declared tool, else none (the block stays text). */
  private toCalls(block: string): ParsedCall[] | undefined {
    const value = parseJson(block);
    if (!Array.isArray(value) || value.length === 0) return undefined;
    const calls: ParsedCall[] = [];
    for (const v of value) {
      const call = jsonCall(v, this.opts.names, ["arguments"], this.nextId(calls.length));
      if (!call) return undefined;
      calls.push(call);
    }
    return calls;
  }
}

/** The `mistral` parser (vLLM's `--tool-call-parser mistral`, pre-v11 tokenizers). */
export function createMistralParser(): ToolCallParser {
  return {
    name: "mistral",
    contentWithCalls: true,
    stream: (opts) => new MistralToolStream(opts),
    callId: mistralCallId,
    prefill: (name) => `${MARK} [{"name": ${name === undefined ? '"' : `${JSON.stringify(name)}, "arguments": `}`,
    format: (content, calls) =>
      calls.length === 0 ? content : `${content}${MARK} [${calls.map((c) => `{"name": ${JSON.stringify(c.name)}, "arguments": ${c.arguments}}`).join(", ")}]`,
  };
}
