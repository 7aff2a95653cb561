// The executor a request sees through its slot lease. It runs the request on the executor of its
// policy version and, when a weight switch with `in_flight: "resume"` stops it between steps,
// continues it on the new version: prompt + tokens so far as the new prompt, the remaining budget,
// the same sampling parameters, Rng stream and token callback, so the client gets one answer.
import { CapacityError } from "../../core/errors.js";
import type { Executor, ExecutorStats, GenerateRequest, GenerateResult } from "../executor.js";
import type { SampledToken } from "../sampling.js";
import { AbortedError } from "../sequence-pool.js";

/** The slot's hold on one request, as the resuming executor drives it. */
export interface ResumableHold {
  /** The executor of the version the request runs on now. */
  readonly executor: Executor;
  readonly policyVersion: number;
  /** Start a run on {@link executor}: a signal that a resume switch aborts. */
  beginSegment(): AbortSignal;
  /** The run ended; true when a resume switch stopped it. */
  endSegment(): boolean;
  /** Move the request to the serving version; false when it cannot go on (engine shutting down). */
  moveToCurrent(): boolean;
}

/** See the file header; one instance per request. */
export class ResumingExecutor implements Executor {
  private readonly versions: number[] = [];

  constructor(
    private readonly hold: ResumableHold,
    private readonly stopIds: ReadonlySet<number>,
  ) {}

  get vocabSize(): number {
    return this.hold.executor.vocabSize;
  }

  get contextSize(): number {
    return this.hold.executor.contextSize;
  }

  get sequences(): number {
    return this.hold.executor.sequences;
  }

  tokenize(text: string): number[] {
    return this.hold.executor.tokenize(text);
  }

  stats(): ExecutorStats {
    return this.hold.executor.stats();
  }

  /** The request's executor is shared with others: closing it is the slot's business. */
  async close(): Promise<void> {}

  /** The policy version of each of the first `count` output tokens generated through this executor. */
  tokenPolicyVersions(count: number): number[] {
    const out = this.versions.slice(0, count);
    while (out.length < count) out.push(this.hold.policyVersion);
    return out;
  }

  async generate(req: GenerateRequest): Promise<GenerateResult> {
    const tokens: SampledToken[] = [];
    this.versions.length = 0;
    const clientAborted = (): boolean => req.signal?.aborted === true;
    let moved = false;
    for (;;) {
      const { executor, policyVersion } = this.hold;
      const prompt = tokens.length === 0 ? req.promptTokenIds : [...req.promptTokenIds, ...tokens.map((t) => t.id)];
      // A smaller context on the new version caps the rest of the output (as max_model_len would).
      const maxTokens = Math.min(req.maxTokens - tokens.length, executor.contextSize - prompt.length);
      if (maxTokens <= 0) return { tokens, finishReason: "length" };
      const link = linkSignals(req.signal, this.hold.beginSegment());
      let part: GenerateResult;
      let resumed: boolean | undefined;
      try {
        part = await executor.generate({ ...req, promptTokenIds: prompt, maxTokens, signal: link.signal });
      } catch (err) {
        resumed = this.hold.endSegment();
        // Stopped by the switch while still waiting for a sequence: nothing generated, go on.
        if (err instanceof AbortedError && resumed && !clientAborted()) part = { tokens: [], finishReason: "abort" };
        // The new version has no room for it: end with what the client already has.
        else if (err instanceof CapacityError && moved) return { tokens, finishReason: "abort" };
        else throw err;
      } finally {
        link.dispose();
      }
      resumed ??= this.hold.endSegment();
      tokens.push(...part.tokens);
      for (let i = 0; i < part.tokens.length; i++) this.versions.push(policyVersion);
      if (part.finishReason !== "abort" || !resumed || clientAborted()) return { ...part, tokens };
      // Stopped between steps by the switch; a request already complete just finishes.
      const last = tokens[tokens.length - 1];
      if (last && this.stopIds.has(last.id)) return { tokens, finishReason: "stop", stopTokenId: last.id };
      if (tokens.length >= req.maxTokens) return { tokens, finishReason: "length" };
      if (!this.hold.moveToCurrent()) return { tokens, finishReason: "abort" };
      moved = true;
    }
  }
}

/** A signal aborted by either input; dispose() detaches it from the outer one. */
function linkSignals(outer: AbortSignal | undefined, inner: AbortSignal): { signal: AbortSignal; dispose(): void } {
  if (!outer) return { signal: inner, dispose: () => {} };
  const ctl = new AbortController();
  const abort = (): void => ctl.abort();
  if (outer.aborted || inner.aborted) ctl.abort();
  outer.addEventListener("abort", abort, { once: true });
  inner.addEventListener("abort", abort, { once: true });
  return {
    signal: ctl.signal,
    dispose: () => {
      outer.removeEventListener("abort", abort);
      inner.removeEventListener("abort", abort);
    },
  };
}
