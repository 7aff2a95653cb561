// The llama.cpp executor's decode step: feed tokens to one sequence and read llama.cpp's next-token
// distribution after the last one, as the flat `[id, p, id, p, …]` its sampler produces (most likely
// first), with no Map and no copy. node-llama-cpp's public calls cost the executor ~0.4–0.7× of its
// own greedy loop: `controlledEvaluate` builds and disposes a native sampler every step, takes the
// sequence's evaluation lock, and revives the distribution into a Map of the whole vocabulary. Here
// one greedy native sampler lives for the request and each step goes straight to the sequence's
// decode queue, so steps of different sequences still share one llama_decode (continuous batching)
// and sampling still runs through the output-reorder guard (llama-output-guard.ts).
// What remains over node-llama-cpp's greedy loop is reading the distribution at all: its native
// sampleToken(…, probabilities = true) sorts the vocabulary and builds a JS Array of 2 × vocab
// Numbers one N-API call at a time (AddonContextSampleTokenWorker::OnOK: ~100-130 µs of JS-thread
// CPU per token on the shipped policy, a greedy read ~10-13 µs); 3.21.1 has no typed-array or
// logits path (getEmbedding is the only typed array it returns, and it reads embeddings).
//
// A reader made with `native` skips that read: llama.cpp samples the token itself (greedy, or its
// dist sampler at temperature 1 over the whole vocabulary, seeded per step by the caller) and
// returns only the token and its probability under the full softmax of the raw logits (the
// sampleToken `confidence`, the same float32 arithmetic as the distribution's entry for that token),
// so seeded sampling and the exact logprob stay while nothing of size vocab crosses into JS.
//
// This reaches node-llama-cpp 3.21.1's internals (pinned exactly in package.json); the constructor
// checks each one and refuses with an ArborError naming what is missing rather than misbehave.
import type { LlamaContextSequence, Token } from "node-llama-cpp";
import { ArborError } from "../core/errors.js";

/** A native sampler (node-llama-cpp's AddonSampler). */
interface NativeSampler {
  applyConfig(config: object): void;
  dispose(): void;
}

/** A token llama.cpp sampled, and its probability under the softmax of the raw logits (float32). */
export interface NativeSample {
  id: number;
  p: number;
}

/** Native sampling: llama.cpp picks the token; see the file header. */
export interface NativeSampling {
  /** 0: greedy (ties to the lower id, as Arbor's sampler); 1: a seeded draw from the whole softmax. */
  temperature: 0 | 1;
}

/** What of LlamaContextSequence's internals the reader uses (node-llama-cpp 3.21.1). */
interface SequenceInternals {
  _decodeTokens(
    tokens: Token[],
    logits: boolean[],
    evaluationPriority: number,
    tokenMeter: unknown,
    contextShift: unknown,
    logitDataMapper: (batchLogitIndex: number, tokenIndex: number) => Promise<unknown>,
    afterBatchAction: unknown,
  ): Promise<unknown[]>;
  _resolveSamplerConfig(options: { temperature: number; topK?: number; topP?: number; minP?: number; seed?: number }): object;
  _tokenMeter: unknown;
  _contextShift: { size: unknown; strategy: unknown };
  _takeIntervalCheckpointIfNeededAfterBatch: (sequenceStateLength: number) => Promise<void> | void;
  _context: {
    /** The sequences with a decode queued for the next batch. */
    _queuedDecodeSequenceIds: ReadonlySet<number>;
    _ctx: { sampleToken(batchLogitIndex: number, sampler: NativeSampler, probabilities: boolean, confidence: boolean): Promise<unknown> };
    _llama: { _bindings: { AddonSampler: new (model: unknown) => NativeSampler } };
  };
  model: { _model: unknown };
}

/** The logit flags of a one-token step (never written: node-llama-cpp slices them before use). */
const ONE_LOGIT: readonly boolean[] = Object.freeze([true]);

/** Resolves after the pending promise jobs and I/O callbacks have run. */
function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Promise hops a batch's after-action waits for the peers' next steps before it falls back to a
 * macrotask. A sequence whose token was just read queues its next step a few hops later (measured
 * in the executor at 1, 2 and 4 sequences: at most 2 hops after the batch's last result), so a
 * running peer queues well within the bound; one that does not (its request ended, a new one is
 * still clearing its sequence) costs one macrotask, the wait every batch paid before.
 */
const MAX_PEER_HOPS = 32;

/** Wait until `queued` holds `peers()` sequences: promise hops first, then at most one macrotask. */
async function waitForPeers(queued: ReadonlySet<number>, peers: () => number): Promise<void> {
  for (let hop = 0; hop < MAX_PEER_HOPS; hop++) {
    if (queued.size >= peers()) return;
    await undefined;
  }
  if (queued.size < peers()) await nextMacrotask();
}

/** The logit flags of a step feeding `tokens`: only the last position's row is read. */
function lastLogit(tokens: readonly number[]): readonly boolean[] {
  if (tokens.length <= 1) return ONE_LOGIT;
  const flags: boolean[] = [];
  flags[tokens.length - 1] = true;
  return flags;
}

/** node-llama-cpp's evaluation priority for a plain `evaluate` (its defaultEvaluationPriority). */
const PRIORITY = 5;

/**
 * Reads the temperature-0 next-token distribution of one sequence, step by step, for one request
 * (or, made with `native`, the token llama.cpp samples and its probability).
 * The caller owns the sequence exclusively while the reader lives (the executor's sequence pool),
 * which is what node-llama-cpp's evaluation lock would otherwise ensure. `dispose()` frees the
 * native sampler.
 */
export class NextTokenReader {
  private readonly seq: SequenceInternals;
  private readonly sampler: NativeSampler;
  private readonly contextShift: { size: unknown; strategy: unknown };
  /** Reads the distribution of a batch row: one closure for every step, not one per token. */
  private readonly readRow: (batchLogitIndex: number) => Promise<unknown>;
  /** Runs after each batch this reader's step was in, before node-llama-cpp gathers the next batch. */
  private readonly afterBatch: (sequenceStateLength: number) => Promise<void> | void;
  /** The one-token step's input and logit flags, reused (node-llama-cpp copies both before decoding). */
  private readonly single: Token[] = [0 as Token];
  private disposed = false;
  /** Native sampling: its mode, and at temperature 1 the sampler config whose seed each step sets. */
  private readonly native: NativeSampling | undefined;
  private readonly seededConfig: { seed?: number } | undefined;

  /**
   * `peers()`: how many sequences of the context step together now (the executor's running
   * requests), so that after a batch the reader waits for them all to queue their next step; absent:
   * 1 (this sequence alone). `native`: llama.cpp samples each token (sampleNext / sampleAfter)
   * instead of handing over the distribution (next / nextAfter).
   */
  constructor(sequence: LlamaContextSequence, peers: () => number = () => 1, native?: NativeSampling) {
    const seq = sequence as unknown as Partial<SequenceInternals>;
    const missing = [
      typeof seq._decodeTokens !== "function" && "_decodeTokens",
      typeof seq._resolveSamplerConfig !== "function" && "_resolveSamplerConfig",
      seq._contextShift === undefined && "_contextShift",
      typeof seq._context?._ctx?.sampleToken !== "function" && "_context._ctx.sampleToken",
      !(seq._context?._queuedDecodeSequenceIds instanceof Set) && "_context._queuedDecodeSequenceIds",
      typeof seq._takeIntervalCheckpointIfNeededAfterBatch !== "function" && "_takeIntervalCheckpointIfNeededAfterBatch",
      typeof seq._context?._llama?._bindings?.AddonSampler !== "function" && "_context._llama._bindings.AddonSampler",
      seq.model?._model === undefined && "model._model",
    ].filter((m): m is string => typeof m === "string");
    if (missing.length > 0) {
      throw new ArborError(`node-llama-cpp's LlamaContextSequence lacks ${missing.join(", ")}: the executor's decode step needs node-llama-cpp 3.21.1`, "engine");
    }
    this.seq = seq as SequenceInternals;
    this.sampler = new this.seq._context._llama._bindings.AddonSampler(this.seq.model._model);
    // Temperature 0 is llama.cpp's greedy chain: the logits are read as they are, never reshaped. At
    // temperature 1 the chain is top-k over the whole vocabulary (a sort), top-p 1 and temperature 1
    // (no-ops) and the dist sampler, so the logits stay raw and the draw covers every token.
    this.native = native;
    if (native !== undefined && native.temperature !== 0 && native.temperature !== 1) {
      throw new ArborError(`NextTokenReader: native sampling takes temperature 0 or 1, got ${String(native.temperature)}`, "engine");
    }
    const config = this.seq._resolveSamplerConfig(native?.temperature === 1 ? { temperature: 1, topK: 0, topP: 1, minP: 0, seed: 0 } : { temperature: 0 });
    this.seededConfig = native?.temperature === 1 ? (config as { seed?: number }) : undefined;
    this.sampler.applyConfig(config);
    this.contextShift = { size: this.seq._contextShift.size, strategy: this.seq._contextShift.strategy };
    const context = this.seq._context;
    const sampler = this.sampler;
    // `_ctx.sampleToken` looked up per call: the output-reorder guard wraps the context's sampleToken.
    // Native: no distribution, only the sampled token's probability (sampleToken's `confidence`).
    const distribution = native === undefined;
    this.readRow = (batchLogitIndex) => context._ctx.sampleToken(batchLogitIndex, sampler, distribution, !distribution);
    // node-llama-cpp decodes again at once with whatever is queued when a batch's after-actions
    // settle; the sequences' next steps are queued a few promise hops after their results, so
    // without a pause each batch held the one sequence that got back first and the running
    // sequences took turns, one decode each (measured: 511 decodes for 2 × 256 tokens). Waiting for
    // every running sequence to queue its step makes them share one decode again. The wait is
    // promise hops, not a macrotask: a trip round the event loop per step cost more than the
    // decode's own dispatch (issue 18 item 6), and node-llama-cpp's dispatch loop then decodes the
    // next batch in the same turn. None when all are queued.
    const checkpoint = this.seq._takeIntervalCheckpointIfNeededAfterBatch;
    const queued = context._queuedDecodeSequenceIds;
    this.afterBatch = (sequenceStateLength) => {
      const done = checkpoint(sequenceStateLength);
      if (queued.size >= peers()) return done;
      return Promise.resolve(done).then(() => waitForPeers(queued, peers));
    };
  }

  /**
   * Feed `tokens` (range-checked by the caller) and return the next-token distribution after the
   * last one: `[id0, p0, id1, p1, …]` over the whole vocabulary, sorted by logit, most likely first
   * (float32 softmax of the raw logits, as node-llama-cpp's `probabilities`). The array is the
   * native call's own; the caller reads it and drops it.
   */
  async next(tokens: readonly number[]): Promise<readonly number[]> {
    this.check("next", false);
    const res = await this.decode(tokens as Token[], lastLogit(tokens));
    const pairs = res?.[1];
    if (!pairs || pairs.length === 0) throw new ArborError(`llama.cpp returned no next-token distribution after ${tokens.length} token(s)`, "engine");
    return pairs;
  }

  /** {@link next} for one token (a decode step), with no array allocated for its input. */
  async nextAfter(token: number): Promise<readonly number[]> {
    this.single[0] = token as Token;
    return this.next(this.single);
  }

  /**
   * Native sampling: feed `tokens` and let llama.cpp sample the next one. `seed` (an integer in
   * 0..2^32-1, ignored when greedy) seeds the draw of this step alone, so a caller that derives it
   * from the position draws the same token at the same position whatever came before.
   */
  async sampleNext(tokens: readonly number[], seed: number): Promise<NativeSample> {
    this.check("sampleNext", true);
    if (this.seededConfig !== undefined) {
      if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new ArborError(`NextTokenReader.sampleNext: seed must be an integer in 0..2^32-1, got ${seed}`, "engine");
      this.seededConfig.seed = seed;
      this.sampler.applyConfig(this.seededConfig);
    }
    const res = await this.decode(tokens as Token[], lastLogit(tokens));
    const id = res?.[0];
    const p = res?.[2];
    if (typeof id !== "number" || id < 0 || typeof p !== "number") throw new ArborError(`llama.cpp sampled no token after ${tokens.length} token(s)`, "engine");
    return { id, p };
  }

  /** {@link sampleNext} for one token (a decode step). */
  async sampleAfter(token: number, seed: number): Promise<NativeSample> {
    this.single[0] = token as Token;
    return this.sampleNext(this.single, seed);
  }

  private check(call: string, native: boolean): void {
    if (this.disposed) throw new ArborError("NextTokenReader used after dispose()", "engine");
    if ((this.native !== undefined) !== native) {
      throw new ArborError(`NextTokenReader.${call}: this reader was made ${native ? "without" : "with"} native sampling`, "engine");
    }
  }

  /** One decode of `tokens`; the row of the last one as sampleToken returned it: [token, distribution?, confidence?]. */
  private async decode(tokens: Token[], logits: readonly boolean[]): Promise<[number, readonly number[] | undefined, number | undefined] | undefined> {
    if (tokens.length === 0) throw new ArborError("NextTokenReader: no tokens to feed", "engine");
    const out = await this.seq._decodeTokens(tokens, logits as boolean[], PRIORITY, this.seq._tokenMeter, this.contextShift, this.readRow, this.afterBatch);
    return out[tokens.length - 1] as [number, readonly number[] | undefined, number | undefined] | undefined;
  }

  /** Free the native sampler (idempotent). */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.sampler.dispose();
  }
}
