// A draft model on llama.cpp beside the policy (issue 17 item 6): a small GGUF with the policy's vocabulary
// (trainer/draft-distiller.ts keeps it aligned with the policy) proposes each request's next k tokens by
// greedy decoding. One sequence per request, reused from step to step: only the tokens after what the
// sequence already holds are evaluated, so a step costs the draft about k single-token evaluations. The
// proposals are verified exactly by the engine (verify-draft.ts): outputs never depend on the draft.
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
  draft(requestId: string, tokens: readonly number[], k: number): Promise<number[]> {
    return this.exclusive(() => this.draftNow(requestId, tokens, k));
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

  private async draftNow(requestId: string, tokens: readonly number[], k: number): Promise<number[]> {
    if (this.closed) throw new ArborError("draft model is closed", "closed");
    if (!Number.isInteger(k) || k < 0) throw new ArborError(`draft model: k must be an integer >= 0, got ${k}`, "engine");
    if (tokens.length === 0) throw new ArborError("draft model: a draft needs at least one context token", "engine");
    const room = this.opts.contextSize - tokens.length;
    const n = Math.min(k, room);
    if (n <= 0) return [];
    const seq = this.loaded.seqs[this.sequenceOf(requestId)] as LlamaContextSequence;
    // Keep the longest prefix the sequence holds; the last context token is always evaluated, since its
    // next-token choice is the first draft token.
    const held = seq.contextTokens;
    let keep = 0;
    const limit = Math.min(held.length, tokens.length - 1);
    while (keep < limit && held[keep] === tokens[keep]) keep++;
    if (keep < seq.nextTokenIndex) await seq.eraseContextTokenRanges([{ start: keep, end: seq.nextTokenIndex }]);
    const out: number[] = [];
    let feed = tokens.slice(keep) as Token[];
    for (let i = 0; i < n; i++) {
      const items = feed.map((id, j) => (j === feed.length - 1 ? ([id, { generateNext: { token: true, options: { temperature: 0 } } }] as const) : id));
      const res = await seq.controlledEvaluate(items as Parameters<LlamaContextSequence["controlledEvaluate"]>[0]);
      const next = res[res.length - 1]?.next?.token;
      if (next === undefined || next === null) throw new ArborError("draft model: llama.cpp returned no next token", "engine");
      out.push(next);
      feed = [next];
    }
    return out;
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
