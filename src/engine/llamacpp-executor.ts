// The llama.cpp executor: one GGUF policy, one context with N sequences, one request per sequence.
// Each step asks llama.cpp for the temperature-0 next-token distribution of every running
// sequence; node-llama-cpp gathers the pending steps of all sequences into one decode batch
// (continuous batching: a new request's prefill joins the running requests' decode steps).
// The hot path (no repetition penalty) reads the distribution as llama.cpp's flat sorted pairs
// through a NextTokenReader and samples from them in place; a repetition penalty needs llama.cpp
// to reshape the raw logits with the history each step, so it keeps the controlled evaluation.
// With `sampler: "llama.cpp"` llama.cpp draws the tokens of the requests it can sample exactly and
// returns only each token's probability (issue 18 item 6: no distribution copied per step).
import type { LlamaContext, LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import { ArborError } from "../core/errors.js";
import { LlamaTokenizer } from "./llama-tokenizer.js";
import { checkGenerateRequest, type Executor, type ExecutorStats, type GenerateRequest, type GenerateResult } from "./executor.js";
import { evaluateTokens, openLlamaContext, type LlamaContextOptions } from "./llama-context.js";
import { NextTokenReader, type NativeSampling } from "./llama-next-token-reader.js";
import { sampleToken, sampleTokenFromPairs, splitLogitControls, StopRule, tokenDraw, type SampledToken } from "./sampling.js";
import { SequencePool } from "./sequence-pool.js";

export interface LlamaCppExecutorOptions extends LlamaContextOptions {
  /** Requests allowed to wait for a sequence; beyond that `generate` rejects with CapacityError. */
  maxWaiting: number;
  /** Tokens that end a generation (included in the output, like vLLM); default the model's end-of-generation set. */
  stopTokenIds?: readonly number[];
  /**
   * Who draws the tokens. "arbor" (default): Arbor's sampler over llama.cpp's whole distribution, the
   * same tokens as the scheduled executor and speculative decoding for a seed. "llama.cpp": llama.cpp
   * samples a request it can sample exactly (temperature 0 or 1, top_p 1, no top logprobs, logit bias
   * or min_tokens) and returns only the token's probability, so nothing of size vocab crosses into JS
   * per token; each draw is seeded from the request's Rng at the token's position (a seeded request
   * still gives the same tokens, and its continuation continues them), but they are not the tokens
   * Arbor's sampler would draw. Other requests use Arbor's sampler.
   */
  sampler?: "arbor" | "llama.cpp";
}

/** Executes requests on node-llama-cpp, `threads: 1` (faster than more threads on small CPUs). */
export class LlamaCppExecutor implements Executor {
  readonly vocabSize: number;
  readonly contextSize: number;
  readonly sequences: number;
  readonly tokenizer: LlamaTokenizer;
  private readonly pool: SequencePool<LlamaContextSequence>;
  private readonly stopIds: ReadonlySet<number>;
  private readonly nativeSampler: boolean;
  /** Sequence → KV cells it holds for a running request. */
  private readonly inUse = new Map<LlamaContextSequence, number>();
  private closed = false;

  private constructor(
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    opts: LlamaCppExecutorOptions,
  ) {
    this.tokenizer = new LlamaTokenizer(model);
    this.vocabSize = this.tokenizer.size;
    this.contextSize = context.contextSize;
    this.sequences = opts.sequences;
    const seqs = Array.from({ length: opts.sequences }, () => context.getSequence());
    this.pool = new SequencePool(seqs, opts.maxWaiting);
    if (opts.sampler !== undefined && opts.sampler !== "arbor" && opts.sampler !== "llama.cpp") {
      throw new ArborError(`sampler must be "arbor" or "llama.cpp", got ${JSON.stringify(opts.sampler)}`, "config");
    }
    this.nativeSampler = opts.sampler === "llama.cpp";
    this.stopIds = new Set(opts.stopTokenIds ?? this.tokenizer.stopIds);
    for (const id of this.stopIds) {
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
        throw new ArborError(`stop token id ${id} is outside the model's vocabulary (size ${this.vocabSize})`, "config");
      }
    }
  }

  /** Load the GGUF at `modelPath` and create the shared context. */
  static async load(opts: LlamaCppExecutorOptions): Promise<LlamaCppExecutor> {
    const { model, context } = await openLlamaContext(opts);
    try {
      return new LlamaCppExecutor(model, context, opts);
    } catch (err) {
      await context.dispose();
      await model.dispose();
      throw err;
    }
  }

  tokenize(text: string): number[] {
    return this.model.tokenize(text, false);
  }

  stats(): ExecutorStats {
    let used = 0;
    for (const n of this.inUse.values()) used += n;
    return {
      running: this.pool.running,
      waiting: this.pool.waiting,
      usedTokens: used,
      totalTokens: this.contextSize * this.sequences,
    };
  }

  async generate(req: GenerateRequest): Promise<GenerateResult> {
    if (this.closed) throw new ArborError("engine is shut down", "closed");
    const prompt = req.promptTokenIds;
    checkGenerateRequest(req, this);

    const lease = await this.pool.acquire(req.signal);
    const seq = lease.item;
    let reader: NextTokenReader | undefined;
    try {
      await seq.clearHistory();
      this.inUse.set(seq, 0);
      const controls = req.controls ?? {};
      const split = splitLogitControls(controls);
      const { raw, logitBias } = split;
      const rule = new StopRule(this.stopIds, controls);
      const base = { temperature: req.temperature, topP: req.topP, topLogprobs: req.topLogprobs, ...(logitBias ? { logitBias } : {}) };
      const native = this.nativeSampler ? nativeSamplingOf(req, split, rule) : undefined;
      if (!raw) reader = new NextTokenReader(seq, () => this.pool.running, native);
      const tokens: SampledToken[] = [];
      // The prompt is fed whole (llama.cpp splits it over batches); only its last position needs
      // the next-token distribution. After that each step feeds the one token just sampled.
      for (;;) {
        if (req.signal?.aborted) return { tokens, finishReason: "abort" };
        const suppress = rule.suppressAt(tokens.length);
        const params = suppress ? { ...base, suppress } : base;
        const position = prompt.length + tokens.length;
        const lastId = tokens.length === 0 ? -1 : (tokens[tokens.length - 1] as SampledToken).id;
        let tok: SampledToken;
        if (reader && native) {
          // llama.cpp draws with a seed taken from the request's draw at this position.
          const seed = native.temperature === 1 ? Math.floor(tokenDraw(req.rng, position) * 0x100000000) : 0;
          const s = await (lastId < 0 ? reader.sampleNext(prompt, seed) : reader.sampleAfter(lastId, seed));
          tok = { id: s.id, logprob: Math.log(s.p), top: [] };
        } else if (reader) {
          // The decode step reuses the reader's one-token input: nothing allocated for it per token.
          const pairs = await (lastId < 0 ? reader.next(prompt) : reader.nextAfter(lastId));
          tok = sampleTokenFromPairs(pairs, params, req.rng, position);
        } else {
          const rawControls = raw ? { ...raw, history: [...prompt, ...tokens.map((t) => t.id)] } : undefined;
          const probs = (await evaluateTokens(seq, lastId < 0 ? prompt : [lastId], true, rawControls)) as Map<number, number>;
          tok = sampleToken(probs, params, req.rng, position);
        }
        this.inUse.set(seq, seq.nextTokenIndex);
        tokens.push(tok);
        req.onToken?.(tok);
        if (rule.stopsAt(tok.id, tokens.length)) return { tokens, finishReason: "stop", stopTokenId: tok.id };
        if (tokens.length >= req.maxTokens) return { tokens, finishReason: "length" };
      }
    } finally {
      reader?.dispose();
      this.inUse.delete(seq);
      lease.release();
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.pool.rejectWaiting(new ArborError("engine is shutting down", "closed"));
    await this.context.dispose();
    await this.model.dispose();
  }
}

/**
 * The native sampling a request allows (llama.cpp's draw is Arbor's law and its probability exact), or
 * undefined: no raw controls, logit bias or min_tokens suppression, top_p 1, no top logprobs, temperature 0 or 1.
 */
function nativeSamplingOf(req: GenerateRequest, { raw, logitBias }: ReturnType<typeof splitLogitControls>, rule: StopRule): NativeSampling | undefined {
  if (raw || logitBias || rule.suppressAt(0) !== undefined) return undefined;
  if (req.topP !== 1 || req.topLogprobs !== 0) return undefined;
  if (req.temperature === 0) return { temperature: 0 };
  if (req.temperature === 1) return { temperature: 1 };
  return undefined;
}
