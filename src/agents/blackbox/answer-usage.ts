// Reads how many tokens a gateway answer generated, as the answer passes through a black box's proxy,
// so the per-program token budget (agent.maxTotalTokens) holds for streamed answers too. Coding-agent
// CLIs stream almost every call: a JSON body's `usage` alone missed all of them. Three answer shapes:
//   - JSON: `usage.completion_tokens` (OpenAI chat) or `usage.output_tokens` (Anthropic, Responses);
//   - SSE, OpenAI chat: the closing chunk with `usage` (stream_options.include_usage);
//   - SSE, Anthropic Messages: `message_delta`'s cumulative `usage.output_tokens`;
//   - SSE, Responses: `response.completed` / `response.incomplete` with `response.usage.output_tokens`.
// The reader keeps only the event being read (bounded), never the whole stream.
import { StringDecoder } from "node:string_decoder";

/** What an answer's body said about its generated tokens. */
export type AnswerUsage = { counted: true; tokens: number } | { counted: false; reason: string };

/** Largest JSON body, or single SSE event, that is parsed, bytes (default 8 MiB). */
const DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024;

/** The generated-token count one parsed object carries, wherever its shape keeps it. */
function tokensOf(obj: unknown): number | undefined {
  if (typeof obj !== "object" || obj === null) return undefined;
  const o = obj as { usage?: unknown; response?: { usage?: unknown } | null; message?: { usage?: unknown } | null };
  // Responses events nest the usage in `response`; Anthropic's message_start in `message`.
  for (const usage of [o.usage, o.response?.usage, o.message?.usage]) {
    if (typeof usage !== "object" || usage === null) continue;
    const u = usage as { completion_tokens?: unknown; output_tokens?: unknown };
    const n = u.completion_tokens ?? u.output_tokens;
    if (typeof n === "number" && Number.isInteger(n) && n >= 0) return n;
  }
  return undefined;
}

/**
 * Feed an answer's body chunk by chunk with {@link push}, then call {@link finish}. The content type
 * decides the parse: `application/json` (the whole body, up to the byte limit) or `text/event-stream`
 * (event by event; usage counts are cumulative, so the last one seen is the answer's).
 */
export class AnswerUsageReader {
  private readonly sse: boolean;
  private readonly json: boolean;
  private readonly maxEventBytes: number;
  private chunks: Buffer[] = [];
  private size = 0;
  private oversized = false;
  /** SSE: the unfinished line, and the data lines of the event being read. */
  private line = "";
  private readonly decoder = new StringDecoder("utf8");
  private data: string[] = [];
  private dataBytes = 0;
  private last: number | undefined;

  constructor(contentType: string, opts: { maxEventBytes?: number } = {}) {
    const type = contentType.toLowerCase();
    this.sse = type.includes("text/event-stream");
    this.json = !this.sse && type.includes("application/json");
    this.maxEventBytes = opts.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
  }

  /** Take the next piece of the body. */
  push(chunk: Buffer): void {
    if (this.json) {
      this.size += chunk.length;
      if (this.size > this.maxEventBytes) {
        this.oversized = true;
        this.chunks = [];
      } else this.chunks.push(chunk);
      return;
    }
    if (!this.sse) return;
    // The decoder holds back a multi-byte character split across chunks.
    const text = this.line + this.decoder.write(chunk);
    const lines = text.split(/\r\n|\r|\n/);
    this.line = lines.pop() ?? "";
    if (this.line.length > this.maxEventBytes) {
      // A line longer than any event read: drop it, and the event it belongs to.
      this.oversized = true;
      this.line = "";
      this.dataBytes = this.maxEventBytes + 1;
    }
    for (const l of lines) this.onLine(l);
  }

  /** The answer is complete: what it said about its generated tokens. */
  finish(): AnswerUsage {
    if (this.json) {
      if (this.oversized) return { counted: false, reason: `JSON answer over ${this.maxEventBytes} bytes` };
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(this.chunks).toString("utf8"));
      } catch {
        return { counted: false, reason: "answer is not valid JSON" };
      }
      const n = tokensOf(body);
      return n === undefined ? { counted: false, reason: "JSON answer has no usage" } : { counted: true, tokens: n };
    }
    if (this.sse) {
      const rest = this.line + this.decoder.end();
      if (rest !== "") this.onLine(rest);
      this.onLine("");
      if (this.last !== undefined) return { counted: true, tokens: this.last };
      return { counted: false, reason: this.oversized ? `an SSE event over ${this.maxEventBytes} bytes was skipped and no usage was read` : "stream carried no usage" };
    }
    return { counted: false, reason: "answer is neither JSON nor an event stream" };
  }

  private onLine(l: string): void {
    if (l === "") return this.dispatch();
    if (!l.startsWith("data:")) return; // event:, id:, retry: and comments carry no usage
    const value = l.slice(l.startsWith("data: ") ? 6 : 5);
    this.dataBytes += value.length;
    if (this.dataBytes > this.maxEventBytes) this.oversized = true;
    else this.data.push(value);
  }

  private dispatch(): void {
    const data = this.data.join("\n");
    const skip = this.dataBytes > this.maxEventBytes;
    this.data = [];
    this.dataBytes = 0;
    if (skip || data === "" || data === "[DONE]") return;
    let event: unknown;
    try {
      event = JSON.parse(data);
    } catch {
      return;
    }
    const n = tokensOf(event);
    if (n !== undefined) this.last = n;
  }
}
