// The streaming skeleton the tool-call and reasoning parsers share: text is appended to a buffer,
// and each push (or the final flush) drains what is decided. Only `drain` differs by format, so the
// readers cannot disagree on how pushes and the flush reach it. Tool-call readers add the calls
// found so far and the two common drain loops: text that may still become a marker is held back,
// a call is decided at its closing marker, and a malformed call stays text.
import { heldPrefix } from "./scan.js";
import type { ParsedCall, ToolCallStream, ToolParseOptions, ToolParseStep } from "./tool-parser.js";

/** A reader that buffers pushed text and drains what is decided; `final` on the flush. */
export abstract class BufferedStream<Step> {
  protected buffer: string;

  constructor(initial = "") {
    this.buffer = initial;
  }

  push(text: string): Step {
    this.buffer += text;
    return this.drain(false);
  }

  /** The generation ended: everything held back is decided. */
  flush(): Step {
    return this.drain(true);
  }

  protected abstract drain(final: boolean): Step;
}

/** How a format delimits one call: the markers around its body, and how a body reads as a call. */
export interface DelimitedCallFormat {
  open: string;
  close: string;
  /**
   * Text the chat template writes before a call when something precedes it (Qwen's newline): it
   * belongs to the call's markup, so it is neither content nor lost when the call parses.
   */
  separator?: string;
}

/** A tool-call reader: the prefill starts the buffer, calls are numbered `<idPrefix>_<n>` per answer. */
export abstract class ToolStreamBase extends BufferedStream<ToolParseStep> implements ToolCallStream {
  protected readonly calls: ParsedCall[] = [];

  constructor(protected readonly opts: ToolParseOptions) {
    super(opts.prefill ?? "");
  }

  get callCount(): number {
    return this.calls.length;
  }

  /** False once a call is found under `single` (parallel_tool_calls false): the rest is text. */
  protected get parsing(): boolean {
    return !(this.opts.single === true && this.calls.length > 0);
  }

  /** The id of the next call found. */
  protected nextId(offset = 0): string {
    return `${this.opts.idPrefix}_${this.calls.length + offset}`;
  }

  /** Records a found call and adds it to this step's calls. */
  protected accept(call: ParsedCall, step: ToolParseStep): void {
    this.calls.push(call);
    step.calls.push(call);
  }

  /** Moves the first `n` buffered characters to this step's content. */
  protected emit(n: number, step: ToolParseStep): void {
    step.content += this.buffer.slice(0, n);
    this.buffer = this.buffer.slice(n);
  }

  /**
   * The drain of a format whose calls are `open body close` anywhere in the answer: content up to a
   * marker is emitted, a marker's possible start is held back while streaming, and each closed call
   * is decided by `toCall` (undefined: the whole markup stays text). An unclosed call stays text at
   * the flush.
   */
  protected drainDelimited(final: boolean, format: DelimitedCallFormat, toCall: (body: string) => ParsedCall | undefined): ToolParseStep {
    const { open: OPEN, close: CLOSE, separator: SEP = "" } = format;
    const step: ToolParseStep = { content: "", calls: [] };
    for (;;) {
      const parsing = this.parsing;
      const open = parsing ? this.buffer.indexOf(OPEN) : -1;
      if (open < 0) {
        this.emit(this.buffer.length - (final || !parsing ? 0 : heldPrefix(this.buffer, SEP + OPEN, OPEN)), step);
        break;
      }
      const start = SEP !== "" && open > 0 && this.buffer.endsWith(SEP, open) ? open - SEP.length : open;
      this.emit(start, step);
      const bodyStart = open - start + OPEN.length;
      const close = this.buffer.indexOf(CLOSE, bodyStart);
      if (close < 0) {
        if (final) this.emit(this.buffer.length, step);
        break;
      }
      const whole = this.buffer.slice(0, close + CLOSE.length);
      this.buffer = this.buffer.slice(whole.length);
      const call = toCall(whole.slice(bodyStart, close));
      if (call) this.accept(call, step);
      else step.content += whole;
    }
    return step;
  }
}
