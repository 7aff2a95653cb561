// Runs scheduler step plans on llama.cpp: one context with one sequence per schedulable request.
// Each chunk evaluates the request's tokens [numComputedTokens, +numNewTokens) on its sequence; all
// chunks of a step are submitted together so node-llama-cpp decodes them in one batch. Sampling is
// Arbor's own (sampleToken over the temperature-0 distribution, per-request Rng), so tokens match
// LlamaCppExecutor for the same seed whatever the batching, chunking or preemption.
import type { LlamaContext, LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { realClock } from "../../core/real-clock.js";
import { evaluateTokens, openLlamaContext, type LlamaContextOptions } from "../llama-context.js";
import { sampleToken, type SamplingParams, type TokenLogprob } from "../sampling.js";
import type { SampledTokenOut, ScheduledChunk, StepPlan } from "../scheduler/step-plan.js";
import type { RunnerRequest, RunnerStepResult, StepRunner } from "./step-runner.js";

/** `sequences` is the scheduler's maxNumSeqs, `contextSize` its maxModelLen. */
export interface LlamaCppStepRunnerOptions extends LlamaContextOptions {
  /** Measures step durations (default the wall clock). */
  clock?: Clock;
}

/** Token accounting since load: what prefix reuse saved and what it had to recompute. */
export interface LlamaCppStepRunnerStats {
  /** Tokens evaluated in total. */
  evaluatedTokens: number;
  /** Tokens a request found already held by the free sequence it was given (prefix reuse). */
  reusedTokens: number;
  /** Tokens evaluated beyond the plan's numNewTokens: prefix-cache hits the sequence did not hold. */
  recomputedTokens: number;
}

interface RunnerReq {
  /** Prompt then the tokens sampled so far. */
  tokens: number[];
  params: SamplingParams;
  rng: RunnerRequest["rng"];
  seq: number | undefined;
}

/** A StepRunner over one llama.cpp context; see the file header. */
export class LlamaCppStepRunner implements StepRunner {
  readonly vocabSize: number;
  readonly contextSize: number;
  private readonly seqs: LlamaContextSequence[];
  /** Sequence index → request holding it. */
  private readonly owner: (string | undefined)[];
  private readonly requests = new Map<string, RunnerReq>();
  private readonly clock: Clock;
  private readonly counters: LlamaCppStepRunnerStats = { evaluatedTokens: 0, reusedTokens: 0, recomputedTokens: 0 };
  private closed = false;

  private constructor(
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    opts: LlamaCppStepRunnerOptions,
  ) {
    this.vocabSize = [...model.iterateAllTokens()].length;
    this.contextSize = context.contextSize;
    this.seqs = Array.from({ length: opts.sequences }, () => context.getSequence());
    this.owner = new Array<string | undefined>(opts.sequences).fill(undefined);
    this.clock = opts.clock ?? realClock;
  }

  /** Load the GGUF and create a context of `sequences` sequences (threads 1, exact KV by default). */
  static async load(opts: LlamaCppStepRunnerOptions): Promise<LlamaCppStepRunner> {
    const { model, context } = await openLlamaContext(opts);
    return new LlamaCppStepRunner(model, context, opts);
  }

  /** Plain-text tokenization (no BOS). */
  tokenize(text: string): number[] {
    return this.model.tokenize(text, false);
  }

  stats(): LlamaCppStepRunnerStats {
    return { ...this.counters };
  }

  /** The tokens a sequence holds (tests and debugging). */
  sequenceTokens(index: number): number[] {
    const s = this.seqs[index];
    if (!s) throw new RangeError(`no sequence ${index}`);
    return [...s.contextTokens];
  }

  /** The sequence a request holds, if any. */
  sequenceOf(requestId: string): number | undefined {
    return this.requests.get(requestId)?.seq;
  }

  addRequest(requestId: string, req: RunnerRequest): void {
    if (this.requests.has(requestId)) throw new ArborError(`llama.cpp runner: request ${requestId} is already registered`, "engine");
    this.requests.set(requestId, {
      tokens: [...req.promptTokenIds],
      params: { temperature: req.temperature, topP: req.topP, topLogprobs: req.topLogprobs },
      rng: req.rng,
      seq: undefined,
    });
  }

  removeRequest(requestId: string): void {
    const r = this.requests.get(requestId);
    if (!r) return;
    this.release(r);
    this.requests.delete(requestId);
  }

  async run(plan: StepPlan): Promise<RunnerStepResult> {
    if (this.closed) throw new ArborError("llama.cpp runner is closed", "closed");
    const start = this.clock.now();
    // Finished and preempted requests give their sequence back; its tokens stay for prefix reuse.
    for (const id of plan.finished) this.removeRequest(id);
    for (const id of plan.preempted) {
      const r = this.requests.get(id);
      if (r) this.release(r);
    }
    const sampled = new Map<string, SampledTokenOut>();
    const top = new Map<string, TokenLogprob[]>();
    if (plan.chunks.length === 0) return { stepId: plan.stepId, sampled, top, durationMs: 0 };

    const work: { id: string; r: RunnerReq; c: ScheduledChunk; from: number; fresh: boolean }[] = [];
    for (const c of plan.chunks) {
      const r = this.requests.get(c.requestId);
      if (!r) throw new ArborError(`step ${plan.stepId}: request ${c.requestId} is not registered with the llama.cpp runner`, "engine");
      const end = c.numComputedTokens + c.numNewTokens;
      if (end > r.tokens.length) {
        throw new ArborError(`step ${plan.stepId}: request ${c.requestId} has ${r.tokens.length} tokens, the plan computes up to ${end}`, "engine");
      }
      const fresh = r.seq === undefined;
      if (fresh) this.assign(c.requestId, r, end);
      work.push({ id: c.requestId, r, c, from: 0, fresh });
    }
    // Make each sequence hold exactly the tokens it keeps (erasures first, then one batched evaluate).
    await Promise.all(work.map(async (w) => (w.from = await this.align(w.r, w.c, w.fresh))));
    const outs = await Promise.all(work.map((w) => this.evaluate(w.r, w.from, w.c)));
    for (let i = 0; i < work.length; i++) {
      const w = work[i] as (typeof work)[number];
      const probs = outs[i];
      if (!probs) continue;
      const tok = sampleToken(probs, w.r.params, w.r.rng);
      // The token is fed back by the next decode chunk; the scheduler keeps the same list.
      w.r.tokens.push(tok.id);
      sampled.set(w.id, { tokenId: tok.id, logprob: tok.logprob });
      if (tok.top.length > 0) top.set(w.id, tok.top);
    }
    return { stepId: plan.stepId, sampled, top, durationMs: this.clock.now() - start };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.context.dispose();
    await this.model.dispose();
  }

  private release(r: RunnerReq): void {
    if (r.seq !== undefined) this.owner[r.seq] = undefined;
    r.seq = undefined;
  }

  /** Give a request the free sequence sharing the longest prefix with its first `end` tokens. */
  private assign(requestId: string, r: RunnerReq, end: number): void {
    let best = -1;
    let bestLen = -1;
    for (let i = 0; i < this.seqs.length; i++) {
      if (this.owner[i] !== undefined) continue;
      const n = commonPrefix((this.seqs[i] as LlamaContextSequence).contextTokens, r.tokens, end);
      if (n > bestLen) {
        best = i;
        bestLen = n;
      }
    }
    // The scheduler runs at most maxNumSeqs requests, and each holds at most one sequence.
    if (best < 0) throw new ArborError(`llama.cpp runner: no free sequence for ${requestId} (more running requests than sequences)`, "engine");
    this.owner[best] = requestId;
    r.seq = best;
  }

  /**
   * Erase what the request's sequence holds beyond its usable prefix; returns the position from
   * which the chunk must be evaluated (numComputedTokens, or less when the sequence lacks part of it).
   */
  private async align(r: RunnerReq, c: ScheduledChunk, fresh: boolean): Promise<number> {
    const seq = this.seqs[r.seq as number] as LlamaContextSequence;
    const end = c.numComputedTokens + c.numNewTokens;
    // A sampling chunk evaluates at least its last token: that position's output is the distribution.
    const cap = c.samples ? end - 1 : end;
    const held = seq.nextTokenIndex;
    const keep = held === c.numComputedTokens && held <= cap ? held : commonPrefix(seq.contextTokens, r.tokens, cap);
    if (keep < held) await seq.eraseContextTokenRanges([{ start: keep, end: held }]);
    if (fresh) this.counters.reusedTokens += keep;
    this.counters.recomputedTokens += Math.max(0, c.numComputedTokens - keep);
    return keep;
  }

  /** Evaluate tokens [from, end) of the chunk; the next-token distribution when it samples. */
  private async evaluate(r: RunnerReq, from: number, c: ScheduledChunk): Promise<Map<number, number> | undefined> {
    const seq = this.seqs[r.seq as number] as LlamaContextSequence;
    const end = c.numComputedTokens + c.numNewTokens;
    if (from >= end) return undefined;
    const tokens = r.tokens.slice(from, end);
    this.counters.evaluatedTokens += tokens.length;
    return evaluateTokens(seq, tokens, c.samples);
  }
}

/** Length of the common prefix of `a` and `b`, at most `cap`. */
function commonPrefix(a: readonly number[], b: readonly number[], cap: number): number {
  const n = Math.min(a.length, b.length, cap);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
