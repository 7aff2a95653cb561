// Makes node-llama-cpp's parallel sampling safe against llama.cpp's lazy output reorder.
// llama.cpp writes a batch's output rows in ubatch order and, when that differs from the batch's
// order (split_equal puts a short prompt's last token in an earlier ubatch than a long one's), it
// records the row swaps and applies them on the first read of any row after the decode
// (llama_context::output_reorder, llama.cpp PR #14853) — unsynchronized. node-llama-cpp samples each
// sequence of a batch in its own libuv worker thread (AddonContext.sampleToken), so two sequences
// reading at once can both apply the swaps (undoing them) or read half-swapped rows: a sequence then
// samples from another sequence's distribution (measured: about 1 such batch in 3,000-10,000 on this
// machine; the first step of scheduled-llamacpp.test.ts's preemption test is one).
// A batch of one-token items (every decode step) is added to llama.cpp in ascending sequence order
// instead: each ubatch llama.cpp cuts from it is then a contiguous run of the batch (split_simple,
// split_seq, and split_equal, sequential or not, in the llama.cpp node-llama-cpp 3.21.1 ships), its
// outputs come out in batch order, no swap is recorded, and the batch's reads run in parallel at
// once. Reading the first row alone before the others cost the executor a worker-thread round trip
// and a whole distribution's conversion per step (issue 18 item 6).
import type { LlamaContext } from "node-llama-cpp";
import { ArborError } from "../core/errors.js";

/** The calls of node-llama-cpp's native context (AddonContext) the guard wraps. */
export interface NativeOutputContext {
  initBatch(size: number): void;
  addToBatch(sequenceId: number, firstTokenIndex: number, tokens: Uint32Array, logitIndexes: Uint32Array): Uint32Array;
  decodeBatch(...args: unknown[]): Promise<unknown>;
  sampleToken(...args: unknown[]): Promise<unknown>;
}

/** One addToBatch call held until the decode, and the logit-row array handed back for it. */
interface HeldItem {
  sequenceId: number;
  firstTokenIndex: number;
  tokens: Uint32Array;
  logitIndexes: Uint32Array;
  rows: Uint32Array;
}

/**
 * Let the first sampling call after each decode run alone (it applies the pending reorder) unless
 * the batch was added in an order whose outputs need none; the batch's other sampling calls start
 * once it has finished and only read rows, in parallel as before. Throws ArborError "engine" when
 * the context lacks the native calls it wraps (a node-llama-cpp whose internals changed): sampling
 * unguarded would silently mix up sequences' tokens.
 */
export function guardOutputReorder(context: LlamaContext): void {
  const ctx = (context as unknown as { _ctx?: Partial<NativeOutputContext> })._ctx;
  const missing = (["initBatch", "addToBatch", "decodeBatch", "sampleToken"] as const).filter((m) => typeof ctx?.[m] !== "function");
  if (!ctx || missing.length > 0) {
    throw new ArborError(`node-llama-cpp's context has no _ctx.${missing.join("/_ctx.")}: cannot guard parallel sampling against llama.cpp's output reorder`, "engine");
  }
  const init = (ctx.initBatch as NativeOutputContext["initBatch"]).bind(ctx);
  const add = (ctx.addToBatch as NativeOutputContext["addToBatch"]).bind(ctx);
  const decode = (ctx.decodeBatch as NativeOutputContext["decodeBatch"]).bind(ctx);
  const sample = (ctx.sampleToken as NativeOutputContext["sampleToken"]).bind(ctx);
  /** The items of the batch being built, added to llama.cpp when it is decoded. */
  let held: HeldItem[] = [];
  /** The first sampling call since the last decode, settled or not; undefined before it starts. */
  let first: Promise<unknown> | undefined;
  /** Whether the last decode's outputs came out in batch order (no reorder pending). */
  let inOrder = false;
  // The native methods are read-only properties of its prototype: shadow them on the instance.
  define(ctx, "initBatch", (size: number) => {
    held = [];
    return init(size);
  });
  define(ctx, "addToBatch", (sequenceId: number, firstTokenIndex: number, tokens: Uint32Array, logitIndexes: Uint32Array) => {
    // node-llama-cpp reads the returned rows only after the decode: they are filled in then.
    const rows = new Uint32Array(logitIndexes.length);
    held.push({ sequenceId, firstTokenIndex, tokens, logitIndexes, rows });
    return rows;
  });
  define(ctx, "decodeBatch", (...args: unknown[]) => {
    const items = held;
    held = [];
    // A decode of items the guard did not see added is read the careful way.
    inOrder = items.length > 0 && items.every((item) => item.tokens.length === 1) && new Set(items.map((item) => item.sequenceId)).size === items.length;
    if (inOrder) items.sort((a, b) => a.sequenceId - b.sequenceId);
    try {
      for (const item of items) item.rows.set(add(item.sequenceId, item.firstTokenIndex, item.tokens, item.logitIndexes));
    } catch (err) {
      return Promise.reject(err);
    }
    // node-llama-cpp samples a batch only after its decode resolves, and decodes the next batch
    // only after every sampling call of this one settled: no sampling call straddles a decode.
    first = undefined;
    return decode(...args);
  });
  define(ctx, "sampleToken", (...args: unknown[]) => {
    if (inOrder) return sample(...args);
    if (first) return first.then(() => sample(...args));
    const out = sample(...args);
    first = out.catch(() => undefined);
    return out;
  });
}

function define(ctx: object, name: keyof NativeOutputContext, fn: (...args: never[]) => unknown): void {
  Object.defineProperty(ctx, name, { value: fn, writable: true, configurable: true, enumerable: false });
}
