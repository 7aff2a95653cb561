// Where one call runs when engines serve prefill/decode roles (Forge's cost-aware routing): whole on a
// mixed engine, or prefilled on one engine and decoded on another with the prompt's KV moved through the
// global KV pool. The choice weighs queueing delay against the cost of moving the KV: each engine's
// delay is modelled from the requests it has in flight, the move from the KV's bytes (prompt tokens ×
// bytes per token) over the pool's bandwidth, written once and read once, plus a fixed latency.
import { DisaggCostOptionsSchema, type DisaggCostOptions } from "../core/config.js";
import { ArborError } from "../core/errors.js";

// The schema lives in core/config.ts: a `type: disagg` backend's `cost` is the same object.
export { DisaggCostOptionsSchema, type DisaggCostOptions };

/** Requests in flight on each engine of a role (index = engine). */
export interface DisaggLoad {
  prefill: readonly number[];
  decode: readonly number[];
  mixed: readonly number[];
}

export type Placement =
  | { kind: "mixed"; engine: number; costMs: number }
  | { kind: "split"; prefill: number; decode: number; costMs: number; transferMs: number };

/**
 * The cheapest placement of a call with `promptTokens` under `load`: the least-loaded mixed engine
 * (queueing only), or the least-loaded prefill and decode engines (queueing on both plus the KV move).
 * A tie goes to the mixed engine (nothing to move). Throws a "config" ArborError when no placement exists.
 */
export function choosePlacement(promptTokens: number, load: DisaggLoad, kvBytesPerToken: number, options: DisaggCostOptions = {}): Placement {
  const o = DisaggCostOptionsSchema.parse(options);
  const queue = (inFlight: number): number => o.queueMsPerRequest * inFlight;
  let best: Placement | undefined;
  const m = argmin(load.mixed);
  if (m >= 0) best = { kind: "mixed", engine: m, costMs: queue(load.mixed[m] as number) };
  const p = argmin(load.prefill);
  const d = argmin(load.decode);
  if (p >= 0 && d >= 0) {
    const transferMs = o.transferLatencyMs + (2 * promptTokens * kvBytesPerToken) / o.transferBytesPerMs;
    const costMs = queue(load.prefill[p] as number) + transferMs + queue(load.decode[d] as number);
    if (!best || costMs < best.costMs) best = { kind: "split", prefill: p, decode: d, costMs, transferMs };
  }
  if (!best) throw new ArborError("prefill/decode placement: needs a mixed engine, or a prefill and a decode engine", "config");
  return best;
}

function argmin(xs: readonly number[]): number {
  let at = -1;
  for (let i = 0; i < xs.length; i++) if (at < 0 || (xs[i] as number) < (xs[at] as number)) at = i;
  return at;
}
