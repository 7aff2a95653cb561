// The prefix-cache and preemption counters of engines a run does not hold in its process (a cluster's engines, an
// external vLLM fleet), for the run's summary line. They come from each engine's GET /metrics (vLLM's counter
// names, which Arbor's engine serves too), read as the run starts and again as it ends: the summary takes the
// difference, since such engines outlive the run. An engine that does not answer, or has no such counters
// (SGLang, llama-server), is left out; a counter that went down (the engine restarted) counts from zero.
import { splitBaseUrl } from "../backends/engine-http.js";
import type { BackendConfig } from "../core/config.js";
import { probeEngine } from "./dashboard/service-probe.js";

/** Prompt tokens looked up and found in prefix caches, and preemptions. */
export interface CacheCounters {
  queries: number;
  hits: number;
  preemptions: number;
}

/** One engine's counters by name; engines that did not answer or have none are absent. */
type Readings = Map<string, CacheCounters>;

/** The backends whose engines serve vLLM's counters on /metrics: vLLM and Arbor engines reached by URL. */
export function metricsEngines(backends: readonly BackendConfig[]): { name: string; url: string }[] {
  return backends.flatMap((b) => ((b.type === "vllm" || b.type === "builtin") && b.url !== undefined ? [{ name: b.name, url: splitBaseUrl(b.name, b.url).root }] : []));
}

/**
 * The engines whose `/metrics` a run reads (its dashboard): `held` (in process, or a cluster's weight-synced ones)
 * and those of `backends` reached by URL, each name once.
 */
export function engineEndpoints(held: readonly { name: string; url: string }[], backends: readonly BackendConfig[]): { name: string; url: string }[] {
  const names = new Set(held.map((e) => e.name));
  return [...held.map((e) => ({ name: e.name, url: e.url })), ...metricsEngines(backends).filter((e) => !names.has(e.name))];
}

async function readAll(engines: readonly { name: string; url: string }[]): Promise<Readings> {
  const rows = await Promise.all(engines.map((e) => probeEngine(e.name, e.url)));
  const out: Readings = new Map();
  for (const r of rows) {
    if (r.prefixCacheQueries === null || r.prefixCacheHits === null) continue;
    out.set(r.name, { queries: r.prefixCacheQueries, hits: r.prefixCacheHits, preemptions: r.preemptions ?? 0 });
  }
  return out;
}

/** What each counter of `end` added since `start` (from zero where it went down), summed over the engines in both. */
export function countersSince(start: Readings, end: Readings): CacheCounters {
  const total: CacheCounters = { queries: 0, hits: 0, preemptions: 0 };
  for (const [name, e] of end) {
    const s = start.get(name);
    if (s === undefined) continue;
    for (const k of ["queries", "hits", "preemptions"] as const) total[k] += e[k] >= s[k] ? e[k] - s[k] : e[k];
  }
  return total;
}

/**
 * Read `engines`' counters now; the function returned reads them again and gives what the run added (zeros when no
 * engine answered both times).
 */
export async function remoteCacheStats(engines: readonly { name: string; url: string }[]): Promise<() => Promise<CacheCounters>> {
  const start = engines.length > 0 ? await readAll(engines) : new Map<string, CacheCounters>();
  return async () => (start.size > 0 ? countersSince(start, await readAll(engines)) : { queries: 0, hits: 0, preemptions: 0 });
}
