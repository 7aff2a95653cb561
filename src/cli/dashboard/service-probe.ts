// Reads an engine's or the gateway's numbers for the dashboard from the same pages Prometheus scrapes:
// GET /metrics (vLLM's metric names on Arbor's engine and on vLLM; the gateway's arbor_gateway_*), parsed
// with the backends' Prometheus reader, and an Arbor engine's GET /health for its policy version. Every
// request is bounded by a timeout; a failure makes the row unhealthy with the reason, never throws.
import { firstPresent, meanOf, parsePrometheusText, sumOf, type PromSample } from "../../backends/prometheus-text.js";
import type { ProgramEntry } from "../../gateway/program-table.js";
import type { EngineRow, GatewayRow, SandboxPoolRow } from "./dashboard-types.js";

/** Longest wait for one /metrics or /health answer (an in-process engine answers late while llama.cpp computes). */
const PROBE_TIMEOUT_MS = 10_000;
/** Largest /metrics page read (a page is a few KB). */
const MAX_PAGE_BYTES = 4 * 1024 * 1024;

async function getText(url: string, headers: Record<string, string>): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
  const text = await res.text();
  if (text.length > MAX_PAGE_BYTES) throw new Error(`${url}: answer larger than ${MAX_PAGE_BYTES} bytes`);
  return { status: res.status, text };
}

async function scrape(base: string, headers: Record<string, string> = {}): Promise<PromSample[]> {
  const r = await getText(`${base}/metrics`, headers);
  if (r.status !== 200) throw new Error(`GET /metrics answered ${r.status}`);
  return parsePrometheusText(r.text);
}

/** One engine's row from its /metrics and /health at `url`. */
export async function probeEngine(name: string, url: string): Promise<EngineRow> {
  const row: EngineRow = { name, url, healthy: false, error: null, running: null, waiting: null, kvUsage: null, prefixCacheQueries: null, prefixCacheHits: null, prefixHitRate: null, preemptions: null, policyVersion: null };
  try {
    const s = await scrape(url);
    row.running = sumOf(s, "vllm:num_requests_running");
    row.waiting = sumOf(s, "vllm:num_requests_waiting");
    row.kvUsage = firstPresent(s, ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"], meanOf);
    row.prefixCacheQueries = firstPresent(s, ["vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"]);
    row.prefixCacheHits = firstPresent(s, ["vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"]);
    row.preemptions = firstPresent(s, ["vllm:num_preemptions_total", "vllm:num_preemptions"]);
    row.prefixHitRate = row.prefixCacheQueries && row.prefixCacheHits !== null ? row.prefixCacheHits / row.prefixCacheQueries : null;
  } catch (e) {
    row.error = `metrics unreadable: ${(e as Error).message}`;
    return row;
  }
  try {
    const h = await getText(`${url}/health`, {});
    const body = h.text ? (JSON.parse(h.text) as { status?: unknown; policy_version?: unknown }) : {};
    if (typeof body.policy_version === "number") row.policyVersion = body.policy_version;
    if (h.status !== 200) row.error = `/health answered ${h.status}${typeof body.status === "string" ? ` (${body.status})` : ""}`;
  } catch (e) {
    // vLLM answers /health with an empty 200; only an unreachable or failing engine is unhealthy.
    if (!(e instanceof SyntaxError)) row.error = `/health unreachable: ${(e as Error).message}`;
  }
  row.healthy = row.error === null;
  return row;
}

/**
 * The gateway's row from its /metrics (with the admin token where the gateway asks for one), and the sandbox pool
 * registered on the same page (null when it has none, or the page cannot be read).
 */
export async function probeGateway(url: string, adminToken?: string): Promise<{ gateway: GatewayRow; sandboxPool: SandboxPoolRow | null }> {
  const row: GatewayRow = { url, healthy: false, error: null, activePrograms: null, terminatedPrograms: null, pauses: null, restores: null, heldCalls: null, inflightRequests: null };
  let sandboxPool: SandboxPoolRow | null = null;
  try {
    const s = await scrape(url, adminToken ? { authorization: `Bearer ${adminToken}` } : {});
    const programs = (state: string): number | null => sumOf(s.filter((x) => x.labels.state === state), "arbor_gateway_programs");
    row.activePrograms = programs("active");
    row.terminatedPrograms = programs("terminated");
    row.pauses = sumOf(s, "arbor_gateway_pauses_total");
    row.restores = sumOf(s, "arbor_gateway_restores_total");
    row.heldCalls = sumOf(s, "arbor_gateway_held_calls");
    row.inflightRequests = sumOf(s, "arbor_gateway_inflight_requests");
    row.healthy = true;
    sandboxPool = sandboxPoolRow(s);
  } catch (e) {
    row.error = `metrics unreadable: ${(e as Error).message}`;
  }
  return { gateway: row, sandboxPool };
}

/** The sandbox pool's numbers from a /metrics page (`arbor_sandbox_pool_*`, src/sandbox/pool-metrics.ts); null when the page has none. */
export function sandboxPoolRow(s: readonly PromSample[]): SandboxPoolRow | null {
  if (!s.some((x) => x.name.startsWith("arbor_sandbox_pool_"))) return null;
  const acquired: Record<string, number> = {};
  for (const x of s) if (x.name === "arbor_sandbox_pool_acquired_total" && x.labels.outcome) acquired[x.labels.outcome] = (acquired[x.labels.outcome] ?? 0) + x.value;
  return {
    warm: sumOf(s, "arbor_sandbox_pool_warm"),
    idle: sumOf(s, "arbor_sandbox_pool_idle"),
    inUse: sumOf(s, "arbor_sandbox_pool_live"),
    queued: sumOf(s, "arbor_sandbox_pool_queued"),
    created: sumOf(s, "arbor_sandbox_pool_created_total"),
    destroyed: sumOf(s, "arbor_sandbox_pool_destroyed_total"),
    acquired,
    leaks: sumOf(s, "arbor_sandbox_pool_leaks_detected_total"),
  };
}

/** One entry of the gateway's GET /programs: a row of its program table. */
export type GatewayProgram = ProgramEntry;

/** The gateway's program table (GET /programs, admin). Throws with the reason when it cannot be read. */
export async function gatewayPrograms(url: string, adminToken?: string): Promise<GatewayProgram[]> {
  const r = await getText(`${url}/programs`, adminToken ? { authorization: `Bearer ${adminToken}` } : {});
  if (r.status !== 200) throw new Error(`gateway GET /programs answered ${r.status}`);
  const body = JSON.parse(r.text) as { programs?: unknown };
  if (!Array.isArray(body.programs)) throw new Error("gateway GET /programs: no `programs` array");
  return body.programs as GatewayProgram[];
}
