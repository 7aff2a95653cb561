// Server-sent-event chunks of a streamed chat or text completion, in vLLM's shapes: one chunk per
// token as it is sampled, the finish reason in the last content chunk, an optional usage chunk.
// The concatenated deltas equal the non-streaming text; token ids and logprobs likewise.
import type { ModelTokenizer } from "../../model/tokenizer.js";
import type { GenerateResult } from "../executor.js";
import { chatLogprobs, completionChunkLogprobs, stopReason, usage, type Usage } from "../openai-responses.js";
import type { SampledToken } from "../sampling.js";

export interface StreamSpec {
  kind: "chat" | "completion";
  /** The served model's tokenizer. */
  vocab: ModelTokenizer;
  /** Decode special tokens as their text (as the non-streamed answer does for the same request). */
  special?: boolean;
  id: string;
  created: number;
  model: string;
  policyVersion: number;
  promptTokenIds: readonly number[];
  /** vLLM's `return_token_ids`: `prompt_token_ids` in the first chunk, `token_ids` in each. */
  returnTokenIds: boolean;
  /** Per-token logprobs in each chunk (chat: `logprobs: true`; completions: `logprobs` set). */
  logprobs: boolean;
  /** `stream_options.include_usage`: a last chunk with `usage` and no choices. */
  includeUsage: boolean;
  /** `stream_options.continuous_usage_stats`: `usage` on every chunk. */
  continuousUsage: boolean;
  /** Tokens that end a generation: such a token is held back for the final chunk. */
  stopTokenIds: ReadonlySet<number>;
  maxTokens: number;
}

export type Chunk = Record<string, unknown>;

/** A streamed chunk as a client reads it (the chat and completions fields together). */
export interface StreamEvent {
  id: string;
  object: string;
  created: number;
  model: string;
  policy_version: number;
  choices: StreamEventChoice[];
  usage?: Usage;
  /** Chat: on the role chunk when `return_token_ids`. */
  prompt_token_ids?: number[];
}

export interface StreamEventChoice {
  index: number;
  /** Chat. */
  delta?: { role?: string; content: string };
  /** Completions. */
  text?: string;
  logprobs: {
    content?: { token: string; logprob: number; bytes: number[]; top_logprobs: { token: string; logprob: number }[] }[];
    tokens?: string[];
    token_logprobs?: number[];
    top_logprobs?: Record<string, number>[];
    text_offset?: number[];
  } | null;
  finish_reason: string | null;
  stop_reason?: number | null;
  token_ids?: number[];
  /** Completions: on the first chunk when `return_token_ids`. */
  prompt_token_ids?: number[];
}

/**
 * Text deltas of a growing token sequence: the ids so far are decoded whole, so the deltas add up
 * to the decoded answer for any tokenizer. A trailing U+FFFD (an incomplete UTF-8 sequence: a byte
 * token, or a byte-level BPE token that splits a character) is held back until the next token or
 * the end decides it.
 */
export class IncrementalText {
  private readonly ids: number[] = [];
  private sent = 0;
  private readonly tok: ModelTokenizer;

  constructor(
    vocab: ModelTokenizer,
    private readonly special = false,
  ) {
    this.tok = vocab;
  }

  /** Characters emitted so far. */
  get length(): number {
    return this.sent;
  }

  /** Append a token; `final` flushes everything held back. */
  push(id: number | null, final = false): string {
    if (id !== null) this.ids.push(id);
    const text = this.tok.decode(this.ids, { special: this.special });
    let end = text.length;
    if (!final && text.endsWith("\uFFFD")) end -= 1;
    if (end <= this.sent) return "";
    const delta = text.slice(this.sent, end);
    this.sent = end;
    return delta;
  }
}

/** Builds the chunks of one streamed request; see the file header. */
export class StreamChunker {
  private received = 0;
  private emitted = 0;
  private readonly text: IncrementalText;
  private promptSent = false;

  constructor(private readonly spec: StreamSpec) {
    this.text = new IncrementalText(spec.vocab, spec.special === true);
  }

  /** Chunks before any token: chat's role chunk (with `prompt_token_ids`); none for completions. */
  start(): Chunk[] {
    if (this.spec.kind !== "chat") return [];
    this.promptSent = true;
    const chunk = this.envelope([{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }]);
    if (this.spec.returnTokenIds) chunk.prompt_token_ids = [...this.spec.promptTokenIds];
    return [chunk];
  }

  /** A token was sampled: its chunk, unless it may be the last one (held for {@link finish}). */
  token(tok: SampledToken): Chunk[] {
    this.received++;
    if (this.spec.stopTokenIds.has(tok.id) || this.received >= this.spec.maxTokens) return [];
    if (this.emitted !== this.received - 1) return [];
    return [this.tokenChunk(tok, null, null)];
  }

  /** The generation ended: tokens not yet sent, the final chunk with the finish reason, usage. */
  finish(result: GenerateResult): Chunk[] {
    const out: Chunk[] = [];
    const pending = result.tokens.slice(this.emitted);
    pending.forEach((tok, i) => {
      if (i < pending.length - 1) out.push(this.tokenChunk(tok, null, null));
      else out.push(this.tokenChunk(tok, result.finishReason, stopReason(this.spec.vocab, result), result.finishReason === "stop"));
    });
    if (pending.length === 0) out.push(this.tokenChunk(null, result.finishReason, stopReason(this.spec.vocab, result)));
    if (this.spec.includeUsage) {
      out.push({ ...this.envelope([]), usage: usage(this.spec.promptTokenIds.length, result.tokens.length) });
    }
    return out;
  }

  private tokenChunk(tok: SampledToken | null, finishReason: string | null, stop: number | null, isStopToken = false): Chunk {
    const { spec } = this;
    const final = finishReason !== null;
    const offset = this.text.length;
    // The stop token ending a generation adds no text (as in the non-streaming answer).
    const delta = this.text.push(tok && !isStopToken ? tok.id : null, final);
    if (tok) this.emitted++;
    const choice: Record<string, unknown> = { index: 0 };
    if (spec.kind === "chat") {
      choice.delta = { content: delta };
      choice.logprobs = spec.logprobs && tok ? chatLogprobs(spec.vocab, [tok]) : null;
    } else {
      choice.text = delta;
      choice.logprobs = spec.logprobs && tok ? completionChunkLogprobs(spec.vocab, tok, offset) : null;
    }
    choice.finish_reason = finishReason;
    if (final || spec.kind === "completion") choice.stop_reason = stop;
    if (spec.returnTokenIds) {
      choice.token_ids = tok ? [tok.id] : [];
      // Completions carry the prompt ids in the first chunk's choice (chat: in the role chunk).
      if (!this.promptSent) choice.prompt_token_ids = [...spec.promptTokenIds];
    }
    this.promptSent = true;
    const chunk = this.envelope([choice]);
    if (spec.continuousUsage) chunk.usage = usage(spec.promptTokenIds.length, this.emitted) satisfies Usage;
    return chunk;
  }

  private envelope(choices: unknown[]): Chunk {
    const { spec } = this;
    return {
      id: spec.id,
      object: spec.kind === "chat" ? "chat.completion.chunk" : "text_completion",
      created: spec.created,
      model: spec.model,
      choices,
      policy_version: spec.policyVersion,
    };
  }
}
