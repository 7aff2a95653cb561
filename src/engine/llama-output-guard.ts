// Makes node-llama-cpp's parallel sampling safe against llama.cpp's lazy output reorder.
// llama.cpp writes a batch's output rows in ubatch order and, when that differs from the batch's
// order (split_equal puts a short prompt's last token in an earlier ubatch than a long one's), it
// records the row swaps and applies them on the first read of any row after the decode
// (llama_context::output_reorder, llama.cpp PR #14853) — unsynchronized. node-llama-cpp samples each
// sequence of a batch in its own libuv worker thread (AddonContext.sampleToken), so two sequences
// reading at once can both apply the swaps (undoing them) or read half-swapped rows: a sequence then
// samples from another sequence's distribution (measured: about 1 such batch in 3,000-10,000 on this
// machine; the first step of scheduled-llamacpp.test.ts's preemption test is one).
import type { LlamaContext } from "node-llama-cpp";
import { ArborError } from "../core/errors.js";

/** The two calls of node-llama-cpp's native context (AddonContext) the guard wraps. */
export interface NativeOutputContext {
  decodeBatch(...args: unknown[]): Promise<unknown>;
  sampleToken(...args: unknown[]): Promise<unknown>;
}

/**
 * Let the first sampling call after each decode run alone (it applies the pending reorder); the
 * batch's other sampling calls start once it has finished and only read rows, in parallel as before.
 * Throws ArborError "engine" when the context lacks the native calls it wraps (a node-llama-cpp
 * whose internals changed): sampling unguarded would silently mix up sequences' tokens.
 */
export function guardOutputReorder(context: LlamaContext): void {
  const ctx = (context as unknown as { _ctx?: Partial<NativeOutputContext> })._ctx;
  if (!ctx || typeof ctx.decodeBatch !== "function" || typeof ctx.sampleToken !== "function") {
    throw new ArborError("node-llama-cpp's context has no _ctx.decodeBatch/_ctx.sampleToken: cannot guard parallel sampling against llama.cpp's output reorder", "engine");
  }
  const decode = ctx.decodeBatch.bind(ctx);
  const sample = ctx.sampleToken.bind(ctx);
  /** The first sampling call since the last decode, settled or not; undefined before it starts. */
  let first: Promise<unknown> | undefined;
  // The native methods are read-only properties of its prototype: shadow them on the instance.
  define(ctx, "decodeBatch", (...args: unknown[]) => {
    // node-llama-cpp samples a batch only after its decode resolves, and decodes the next batch
    // only after every sampling call of this one settled: no sampling call straddles a decode.
    first = undefined;
    return decode(...args);
  });
  define(ctx, "sampleToken", (...args: unknown[]) => {
    if (first) return first.then(() => sample(...args));
    const out = sample(...args);
    first = out.catch(() => undefined);
    return out;
  });
}

function define(ctx: object, name: keyof NativeOutputContext, fn: (...args: unknown[]) => Promise<unknown>): void {
  Object.defineProperty(ctx, name, { value: fn, writable: true, configurable: true, enumerable: false });
}
