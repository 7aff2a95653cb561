// Splits a server-sent event stream into its events' `data` payloads, pushed chunk by chunk, with a
// bound on what one event may buffer. One parser (eventsource-parser) serves every SSE reader in
// Arbor: the backends reading engine streams and the black-box proxy counting streamed usage. The
// bound matters because both read streams from processes they do not control: without it one
// endless line would grow the buffer until the process dies.
import { createParser, type EventSourceParser } from "eventsource-parser";

/** Largest event (its unfinished line plus its data so far) buffered by default, characters (8 Mi). */
export const DEFAULT_MAX_EVENT_CHARS = 8 * 1024 * 1024;

export interface SseSplitterOptions {
  /** Called with each event's data (multi-line data joined with "\n"); events without data are skipped. */
  onData: (data: string) => void;
  /**
   * Called when an event outgrows {@link SseSplitterOptions.maxEventChars}. The event is dropped and
   * the splitter resumes at the next event. Throwing here ends the push that overflowed.
   */
  onOversized: (maxEventChars: number) => void;
  /** Bound on one event's buffered characters (default {@link DEFAULT_MAX_EVENT_CHARS}). */
  maxEventChars?: number;
}

/** Push-based SSE splitter; see the module comment. */
export class SseSplitter {
  private readonly parser: EventSourceParser;
  private readonly maxEventChars: number;
  private overflowed = false;
  /** After an overflow: the rest of the dropped event is skipped up to its blank line. */
  private skipping = false;
  /** The last characters pushed while skipping, so a blank line split across pushes is still seen. */
  private tail = "";

  constructor(private readonly opts: SseSplitterOptions) {
    this.maxEventChars = opts.maxEventChars ?? DEFAULT_MAX_EVENT_CHARS;
    this.parser = createParser({
      maxBufferSize: this.maxEventChars,
      // The parser bounds what it buffers across pushes; an event whole within one push is checked here,
      // so the outcome does not depend on how the stream was cut.
      onEvent: (e) => (e.data.length > this.maxEventChars ? this.opts.onOversized(this.maxEventChars) : this.opts.onData(e.data)),
      onError: (e) => {
        if (e.type === "max-buffer-size-exceeded") this.overflowed = true;
        // Unknown fields and bad `retry` values carry no data: ignored, as EventSource does.
      },
    });
  }

  /** Take the next piece of the stream (already decoded text). */
  push(text: string): void {
    if (this.skipping) {
      const rest = this.afterBlankLine(text);
      if (rest === undefined) return;
      this.skipping = false;
      text = rest;
    }
    this.parser.feed(text);
    if (!this.overflowed) return;
    // The parser dropped the event and stopped; it restarts clean once the dropped event has ended.
    this.overflowed = false;
    this.parser.reset();
    this.skipping = true;
    // The dropped event's last line ending may already have been read: keep it to see the blank line.
    this.tail = text.slice(-3);
    this.opts.onOversized(this.maxEventChars);
  }

  /** The stream ended: a last event without its closing blank line still counts. */
  end(): void {
    if (!this.skipping) this.parser.feed("\n\n");
    this.parser.reset();
  }

  /** While skipping: the text after the dropped event's blank line, or undefined if it has not come yet. */
  private afterBlankLine(text: string): string | undefined {
    const joined = this.tail + text;
    const m = /\r\n\r\n|\n\n|\r\r|\r\n\n|\n\r\n/.exec(joined);
    if (m === null) {
      this.tail = joined.slice(-3);
      return undefined;
    }
    return joined.slice(m.index + m[0].length);
  }
}
