// The backend's reasoning markers (`<think>`, `</think>`) as the served model's token ids, found
// once per backend with its tokenizer (special tokens parsed, as the model generates them), so the
// token path can count an answer's reasoning tokens on its output ids (model/reasoning/reasoning-tokens.ts).
import type { TokenBackend } from "../../backends/backend.js";
import { untilAborted } from "../../core/until-aborted.js";
import type { ReasoningMarkerIds } from "../../model/reasoning/reasoning-tokens.js";

// A backend serves one model: its markers' ids do not change between calls (nor with new weights).
const cache = new WeakMap<TokenBackend, Promise<ReasoningMarkerIds | undefined>>();

/**
 * The marker ids of `backend`'s reasoning parser; undefined where it has none (or marks none).
 * Throws what the backend's tokenizer throws (a failure is not cached), or `signal.reason`.
 */
export function reasoningMarkerIds(backend: TokenBackend, signal: AbortSignal): Promise<ReasoningMarkerIds | undefined> {
  const markers = backend.reasoningParser?.markers;
  const tokenize = backend.tokenize;
  if (!markers || !tokenize) return Promise.resolve(undefined);
  let found = cache.get(backend);
  if (!found) {
    // Not bound to this call's signal: concurrent calls share the lookup, each waits under its own.
    const ids = async (text: string): Promise<number[]> => (await tokenize.call(backend, { text, addSpecialTokens: false, parseSpecial: true })).tokens;
    found = Promise.all([ids(markers.open), ids(markers.close)]).then(([open, close]) => ({ open, close }));
    cache.set(backend, found);
    found.catch(() => cache.delete(backend));
  }
  return untilAborted(found, signal);
}
