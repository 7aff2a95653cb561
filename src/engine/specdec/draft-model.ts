// A draft model on llama.cpp beside the policy (issue 17 item 6): a small GGUF with the policy's vocabulary
// (trainer/draft-distiller.ts keeps it aligned with the policy) proposes each request's next k tokens by
// greedy decoding. One sequence per request, reused from step to step: only the tokens after what the
// sequence already holds are evaluated. A step's requests are drafted together (`draftBatch`): each draft
// position's evaluations of all of them are queued at once, so llama.cpp runs them as one decode — a step
// costs the draft k decodes whatever the batch size, as the policy's step is one decode for all sequences.
// The proposals are verified exactly by the engine (verify-draft.ts): outputs never depend on the draft.
// `refresh(path)` swaps in the draft distilled from a new policy version at a weight sync.
import type { LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { ArborError } from "../../core/errors.js";
import { openLlamaContext, type LlamaContextOptions } from "../llama-context.js";
import { LlamaTokenizer } from "../llama-tokenizer.js";

/** Options of {@link DraftModelDrafter.load}: the draft's GGUF, sequences (one per request) and context. */
export type DraftModelOptions = LlamaContextOptions & {
  /** The policy's vocabulary size: a draft with another vocabulary is refused. */
  vocabSize?: number;
};

interface Loaded {
  path: string;
  model: LlamaModel;
  context: LlamaContext;
  seqs: LlamaContextSequence[];
}

/** Greedy drafts from a small GGUF on llama.cpp; see the file header. `close()` when done. */
export class DraftModelDrafter {
  private loaded: Loaded;
  /** Request → sequence index. */
  private readonly owner = new Map<string, number>();
  private readonly free: number[];
  /** Drafts run one at a time per sequence and never during a refresh. */
  private lock: Promise<unknown> = Promise.resolve();
  private closed = false;

  private constructor(
    loaded: Loaded,
    private readonly opts: DraftModelOptions,
  ) {
    this.loaded = loaded;
    this.free = Array.from({ length: opts.sequences }, (_, i) => opts.sequences - 1 - i);
  }

  /** Load the draft GGUF. Throws ArborError naming the file when it cannot be loaded or its vocabulary differs. */
  static async load(opts: DraftModelOptions): Promise<DraftModelDrafter> {
    return new DraftModelDrafter(await open(opts.modelPath, opts), opts);
  }

  /** The GGUF the drafts come from now. */
  get modelPath(): string {
    return this.loaded.path;
  }

  /**
   * Up to `k` greedy next tokens of the draft after `tokens` (the request's prompt and output so far), from
   * the request's own sequence. Fewer when the context would overflow; none for k = 0.
   */
  async draft(requestId: string, tokens: readonly number[], k: number): Promise<number[]> {
    const [out] = await this.draftBatch([{ requestId, tokens }], k);
    return out as number[];
  }

  /**
   * {@link draft} for several requests at once, in their order: position by position, all their
   * evaluations go to llama.cpp together (one decode per draft position for the whole batch). The
   * proposals are those each request would get alone. A request may appear once.
   */
  draftBatch(items: readonly { requestId: string; tokens: readonly number[] }[], k: number): Promise<number[][]> {
    return this.exclusive(() => this.draftNow(items, k));
  }

  /** Forget a request: its sequence goes back to the pool (its tokens are erased when reused). */
  release(requestId: string): void {
    const s = this.owner.get(requestId);
    if (s === undefined) return;
    this.owner.delete(requestId);
    this.free.push(s);
  }

  /**
   * Swap in the draft at `path` (a weight sync's new draft); requests keep their sequences, which start
   * empty. The old draft stays in use if the new one cannot be loaded (the error is thrown).
   */
  refresh(path: string): Promise<void> {
    return this.exclusive(async () => {
      if (this.closed) throw new ArborError("draft model is closed", "closed");
      const next = await open(path, this.opts);
      const old = this.loaded;
      this.loaded = next;
      await old.context.dispose();
      await old.model.dispose();
    });
  }

  async close(): Promise<void> {
    await this.exclusive(async () => {
      if (this.closed) return;
      this.closed = true;
      await this.loaded.context.dispose();
      await this.loaded.model.dispose();
    });
  }

  private async draftNow(items: readonly { requestId: string; tokens: readonly number[] }[], k: number): Promise<number[][]> {
    if (this.closed) throw new ArborError("draft model is closed", "closed");
    if (!Number.isInteger(k) || k < 0) throw new ArborError(`draft model: k must be an integer >= 0, got ${k}`, "engine");
    const seen = new Set<string>();
    for (const { requestId, tokens } of items) {
      if (tokens.length === 0) throw new ArborError(`draft model: a draft needs at least one context token (request ${requestId})`, "engine");
      if (seen.has(requestId)) throw new ArborError(`draft model: request ${requestId} appears twice in one batch`, "engine");
      seen.add(requestId);
    }
    const jobs = items.map(({ requestId, tokens }) => {
      const n = Math.max(0, Math.min(k, this.opts.contextSize - tokens.length));
      return { tokens, n, seq: n > 0 ? (this.loaded.seqs[this.sequenceOf(requestId)] as LlamaContextSequence) : undefined, feed: [] as Token[], out: [] as number[] };
    });
    // Keep the longest prefix each sequence holds; the last context token is always evaluated, since its
    // next-token choice is the first draft token.
    await Promise.all(
      jobs.map(async (j) => {
        if (!j.seq) return;
        const held = j.seq.contextTokens;
        let keep = 0;
        const limit = Math.min(held.length, j.tokens.length - 1);
        while (keep < limit && held[keep] === j.tokens[keep]) keep++;
        if (keep < j.seq.nextTokenIndex) await j.seq.eraseContextTokenRanges([{ start: keep, end: j.seq.nextTokenIndex }]);
        j.feed = j.tokens.slice(keep) as Token[];
      }),
    );
    for (let i = 0; ; i++) {
      const active = jobs.filter((j) => j.seq && i < j.n);
      if (active.length === 0) break;
      // Queued in one go (no await between them): node-llama-cpp dispatches them as one batch.
      const results = await Promise.all(
        active.map((j) => {
          const evals = j.feed.map((id, x) => (x === j.feed.length - 1 ? ([id, { generateNext: { token: true, options: { temperature: 0 } } }] as const) : id));
          return (j.seq as LlamaContextSequence).controlledEvaluate(evals as Parameters<LlamaContextSequence["controlledEvaluate"]>[0]);
        }),
      );
      results.forEach((res, x) => {
        const j = active[x] as (typeof active)[number];
        const next = res[res.length - 1]?.next?.token;
        if (next === undefined || next === null) throw new ArborError("draft model: llama.cpp returned no next token", "engine");
        j.out.push(next);
        j.feed = [next];
      });
    }
    return jobs.map((j) => j.out);
  }

  private sequenceOf(requestId: string): number {
    let s = this.owner.get(requestId);
    if (s === undefined) {
      s = this.free.pop();
      if (s === undefined) throw new ArborError(`draft model: all ${this.opts.sequences} sequences are in use (request ${requestId})`, "capacity");
      this.owner.set(requestId, s);
    }
    return s;
  }

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn, fn);
    this.lock = run.catch(() => undefined);
    return run;
  }
}

async function open(path: string, opts: DraftModelOptions): Promise<Loaded> {
  const { model, context } = await openLlamaContext({ ...opts, modelPath: path });
  const size = new LlamaTokenizer(model).size;
  if (opts.vocabSize !== undefined && size !== opts.vocabSize) {
    await context.dispose();
    await model.dispose();
    throw new ArborError(`draft model ${path}: its vocabulary has ${size} tokens, the policy's ${opts.vocabSize}; a draft must share the policy's vocabulary`, "model");
  }
  return { path, model, context, seqs: Array.from({ length: opts.sequences }, () => context.getSequence()) };
}
