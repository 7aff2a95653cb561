// Each output token's own text (what logprobs answers show per token), decoded by the engine in bounded
// batches of parallel /detokenize requests. Each request listens for the call's abort; a batch's requests
// listen on a child signal of their own, so the call's signal holds one listener per batch, not one per
// request (past ten, Node warns of a listener leak on every call with logprobs and more than ten tokens).
import { setMaxListeners } from "node:events";

/** Per-token texts are decoded in batches of this many parallel requests. */
export const DECODE_PARALLEL = 16;

/** Decode ids as the engine does, bounded by `signal`. */
export type DecodeIds = (ids: number[], signal: AbortSignal) => Promise<string>;

/** The text of each of `ids` on its own, in order; aborted with `signal`. */
export async function tokenTexts(ids: readonly number[], decode: DecodeIds, signal: AbortSignal): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < ids.length; i += DECODE_PARALLEL) {
    const batch = ids.slice(i, i + DECODE_PARALLEL);
    out.push(...(await withChildSignal(signal, batch.length, (child) => Promise.all(batch.map((id) => decode([id], child))))));
  }
  return out;
}

/**
 * Run `work` under a child of `signal` that `listeners` requests may each listen to: the child is aborted
 * with the parent, which holds one listener while `work` runs.
 */
async function withChildSignal<T>(signal: AbortSignal, listeners: number, work: (child: AbortSignal) => Promise<T>): Promise<T> {
  const child = new AbortController();
  // One listener per request of the batch is expected, not a leak.
  setMaxListeners(Math.max(listeners, 1), child.signal);
  const follow = (): void => child.abort(signal.reason);
  if (signal.aborted) follow();
  else signal.addEventListener("abort", follow, { once: true });
  try {
    return await work(child.signal);
  } finally {
    signal.removeEventListener("abort", follow);
  }
}
