// Accumulates the token trace of a streamed answer from its vLLM-shaped chunks (prompt ids in the
// first chunk, token ids, logprobs and text deltas per chunk, the finish reason last) and hides the
// fields the client did not ask for. I/O-free: the gateway feeds it each event's parsed data.
import type { Endpoint } from "./openai-request.js";
import { finishReasonOf, TraceShapeError, validateTrace, type ExtractedTrace } from "./trace-extract.js";

export interface StreamTraceOptions {
  /** The client asked for logprobs itself (else each chunk's logprobs become null). */
  clientWantsLogprobs: boolean;
  /** The client sent `return_token_ids: true` itself (else token ids are removed from chunks). */
  clientWantsTokenIds: boolean;
}

/** One streamed answer's trace; {@link push} each chunk, {@link finish} at `[DONE]`. */
export class StreamTrace {
  private promptTokenIds: number[] | undefined;
  private readonly outputTokenIds: number[] = [];
  private readonly logprobs: unknown[] = [];
  private text = "";
  private finish_: unknown = null;
  private policyVersion: unknown;
  private sawTokenIds = false;

  constructor(
    private readonly endpoint: Endpoint,
    private readonly opts: StreamTraceOptions,
  ) {}

  /**
   * Take one chunk into the trace and return it as the client should see it.
   * Throws {@link TraceShapeError} for a chunk Arbor cannot trace.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  push(chunk: any): any {
    if (typeof chunk !== "object" || chunk === null || Array.isArray(chunk)) throw new TraceShapeError("streamed a chunk that is not a JSON object");
    if (chunk.policy_version !== undefined) this.policyVersion ??= chunk.policy_version;
    if (this.endpoint === "chat" && chunk.prompt_token_ids !== undefined) this.setPrompt(chunk.prompt_token_ids);
    const choices: unknown = chunk.choices;
    if (!Array.isArray(choices)) throw new TraceShapeError("streamed a chunk without choices");
    const out = { ...chunk, choices: choices.map((c) => this.choice(c)) };
    if (!this.opts.clientWantsTokenIds) delete out.prompt_token_ids;
    return out;
  }

  /** The complete trace once the stream ended; throws {@link TraceShapeError} when something is missing. */
  finish(): ExtractedTrace {
    if (!this.sawTokenIds) {
      throw new TraceShapeError(
        "streamed no choices[0].token_ids; Arbor needs an engine that honours return_token_ids (the built-in engine, vLLM >= 0.10.2)",
      );
    }
    if (this.finish_ === null) throw new TraceShapeError("streamed no finish_reason before [DONE]");
    return validateTrace({
      promptTokenIds: this.promptTokenIds,
      outputTokenIds: this.outputTokenIds,
      logprobs: this.logprobs,
      outputText: this.text,
      finishReason: finishReasonOf(this.finish_),
      policyVersion: this.policyVersion,
    });
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  private choice(raw: any): unknown {
    if (typeof raw !== "object" || raw === null) throw new TraceShapeError("streamed a choice that is not an object");
    if ((raw.index ?? 0) !== 0) throw new TraceShapeError(`streamed choice ${String(raw.index)} (only n=1 is traced)`);
    if (this.endpoint === "completions" && raw.prompt_token_ids !== undefined) this.setPrompt(raw.prompt_token_ids);
    // Chat's role chunk carries no token ids; every chunk with tokens does.
    const ids: unknown = raw.token_ids ?? [];
    if (raw.token_ids !== undefined && raw.token_ids !== null) this.sawTokenIds = true;
    if (!isTokenIds(ids)) throw new TraceShapeError("streamed invalid choices[0].token_ids");
    const lps: unknown[] =
      this.endpoint === "chat"
        ? (raw.logprobs?.content ?? []).map((c: { logprob?: unknown } | null) => c?.logprob)
        : (raw.logprobs?.token_logprobs ?? []);
    if (!Array.isArray(lps)) throw new TraceShapeError("streamed invalid logprobs");
    this.outputTokenIds.push(...ids);
    this.logprobs.push(...lps);
    const delta: unknown = this.endpoint === "chat" ? (raw.delta?.content ?? "") : (raw.text ?? "");
    if (typeof delta !== "string") throw new TraceShapeError("streamed a text delta that is not a string");
    this.text += delta;
    if (raw.finish_reason !== null && raw.finish_reason !== undefined) this.finish_ = raw.finish_reason;
    const out = { ...raw };
    if (!this.opts.clientWantsLogprobs) out.logprobs = null;
    if (!this.opts.clientWantsTokenIds) {
      delete out.token_ids;
      delete out.prompt_token_ids;
    }
    return out;
  }

  private setPrompt(ids: unknown): void {
    if (!isTokenIds(ids)) throw new TraceShapeError("streamed invalid prompt_token_ids");
    if (this.promptTokenIds !== undefined) throw new TraceShapeError("streamed prompt_token_ids twice");
    this.promptTokenIds = ids;
  }
}

function isTokenIds(x: unknown): x is number[] {
  return Array.isArray(x) && x.every((t) => Number.isInteger(t) && t >= 0);
}
