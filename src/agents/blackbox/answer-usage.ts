// Reads how many tokens a gateway answer generated, as the answer passes through a black box's proxy,
// so the per-program token budget (agent.maxTotalTokens) holds for streamed answers too. Coding-agent
// CLIs stream almost every call: a JSON body's `usage` alone missed all of them. Three answer shapes:
//   - JSON: `usage.completion_tokens` (OpenAI chat) or `usage.output_tokens` (Anthropic, Responses);
//   - SSE, OpenAI chat: the closing chunk with `usage` (stream_options.include_usage);
//   - SSE, Anthropic Messages: `message_delta`'s cumulative `usage.output_tokens`;
//   - SSE, Responses: `response.completed` / `response.incomplete` with `response.usage.output_tokens`.
// The reader keeps only the event being read (bounded, core/sse-splitter.ts), never the whole stream.
import { StringDecoder } from "node:string_decoder";
import { SseSplitter } from "../../core/sse-splitter.js";

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
  private readonly json: boolean;
  private readonly maxEventBytes: number;
  private chunks: Buffer[] = [];
  private size = 0;
  private oversized = false;
  /** SSE: the events' splitter, and the last usage count read. */
  private readonly splitter: SseSplitter | undefined;
  private readonly decoder = new StringDecoder("utf8");
  private skipped = false;
  private last: number | undefined;

  constructor(contentType: string, opts: { maxEventBytes?: number } = {}) {
    const type = contentType.toLowerCase();
    const sse = type.includes("text/event-stream");
    this.json = !sse && type.includes("application/json");
    this.maxEventBytes = opts.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
    this.splitter = sse
      ? new SseSplitter({
          // Characters bound the splitter; a character is at least one byte, so bytes stay bounded too.
          maxEventChars: this.maxEventBytes,
          onData: (data) => this.onEvent(data),
          onOversized: () => {
            this.skipped = true;
          },
        })
      : undefined;
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
    // The decoder holds back a multi-byte character split across chunks.
    this.splitter?.push(this.decoder.write(chunk));
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
    if (this.splitter) {
      this.splitter.push(this.decoder.end());
      this.splitter.end();
      if (this.last !== undefined) return { counted: true, tokens: this.last };
      return { counted: false, reason: this.skipped ? `an SSE event over ${this.maxEventBytes} characters was skipped and no usage was read` : "stream carried no usage" };
    }
    return { counted: false, reason: "answer is neither JSON nor an event stream" };
  }

  private onEvent(data: string): void {
    if (data === "" || data === "[DONE]") return;
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
