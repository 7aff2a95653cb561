// The shapes of the dashboard's JSON/SSE API (docs/dashboard.md), shared by the server (dashboard-server.ts)
// and the web UI (web/dashboard/, which imports these types only). Field names are stable: tools read them.
import type { ProgramSummary, RunSummary } from "../inspect.js";

/** One program of the programs table: the store's facts, with the gateway's live ones while it is active. */
export interface ProgramRow extends ProgramSummary {
  runId: string;
  /** From the gateway's program table while the program is there: reasoning (a call in flight) or acting; else null. */
  phase: "reasoning" | "acting" | null;
  /** Calls at a backend now (gateway); null when the gateway does not hold the program. */
  inFlight: number | null;
  /** Prompt + output tokens of the last call: the program's KV footprint (gateway). */
  contextTokens: number | null;
  /** Backend of the latest call (gateway). */
  backend: string | null;
  /** Last call activity on the dashboard's clock (gateway), else the program's creation time (store). */
  lastActivity: number | null;
}

/** A page of the programs table with the counts by state and phase over the whole filter. */
export interface ProgramsPage {
  /** Programs per state, then per phase (`none` where the gateway does not hold it). */
  counts: Record<string, Record<string, number>>;
  /** Programs matching the filter. */
  total: number;
  offset: number;
  rows: ProgramRow[];
}

/** One engine as its /metrics (vLLM names) and /health say, or why they could not be read. */
export interface EngineRow {
  name: string;
  url: string | null;
  healthy: boolean;
  /** Why the engine counts as unhealthy (unreachable, /health not ok); null when healthy. */
  error: string | null;
  running: number | null;
  waiting: number | null;
  /** 0-1. */
  kvUsage: number | null;
  prefixCacheQueries: number | null;
  prefixCacheHits: number | null;
  /** hits / queries (or the engine's own rate), 0-1; null before any query. */
  prefixHitRate: number | null;
  preemptions: number | null;
  policyVersion: number | null;
}

/** The gateway's program table and pause gate as its /metrics say. */
export interface GatewayRow {
  url: string;
  healthy: boolean;
  error: string | null;
  activePrograms: number | null;
  terminatedPrograms: number | null;
  pauses: number | null;
  restores: number | null;
  heldCalls: number | null;
  inflightRequests: number | null;
}

/**
 * The run's sandbox pool as its own counters say (`arbor_sandbox_pool_*` on the gateway's /metrics, where the
 * embedded run registers them; src/sandbox/pool.ts). A field the page lacks is null.
 */
export interface SandboxPoolRow {
  /** Prepared or being prepared, not yet acquired (`_warm`). */
  warm: number | null;
  /** Of `warm`, finished and waiting for their program (`_idle`). */
  idle: number | null;
  /** Acquired by programs and not yet reclaimed (`_live`). */
  inUse: number | null;
  /** Program ids waiting for a free warm slot (`_queued`). */
  queued: number | null;
  /** Sandboxes created through the provider, and destroyed, since the run started (`_created_total`, `_destroyed_total`). */
  created: number | null;
  destroyed: number | null;
  /** Acquires by outcome: hit, in_flight, warm, miss (`_acquired_total{outcome}`). */
  acquired: Record<string, number>;
  /** Leaks the pool's check found and reclaimed (`_leaks_detected_total`). */
  leaks: number | null;
}

/** One point of the curves: one line of metrics.jsonl (an iteration or a trainer step). */
export interface CurvePoint {
  kind: "iteration" | "step";
  index: number;
  runId: string;
  meanReward: number | null;
  meanOutputTokens: number | null;
  loss: number | null;
  gradNorm: number | null;
  kl: number | null;
  /** The policy's mean token entropy at the step (metrics.jsonl `entropy`). */
  entropy: number | null;
  policyVersion: number;
}

/**
 * One held-out score of the run (metrics.jsonl: the starting `held-out` line, and each iteration's `heldOut`): the
 * policy version scored, its solved rate on the held-out tasks and that rate's standard error.
 */
export interface HeldOutPoint {
  version: number;
  solved: number;
  solvedSe: number | null;
}

export type HighlightKind = "stuck-program" | "unhealthy-engine" | "hygiene-violation" | "validation-drop";

/** Something a person should look at, with its reason. */
export interface Highlight {
  kind: HighlightKind;
  /** The program, engine or task it is about. */
  subject: string;
  reason: string;
}

/** The run list without programs (GET /api/runs). */
export type RunRow = Omit<RunSummary, "programs">;

/** What every poll computes; GET /api/overview and each SSE `overview` event carry it. */
export interface Overview {
  mode: "live" | "store";
  /** Increases with every poll. */
  seq: number;
  /** The dashboard's clock at the poll. */
  time: number;
  runs: RunRow[];
  programCounts: Record<string, Record<string, number>>;
  programsTotal: number;
  engines: EngineRow[];
  gateway: GatewayRow | null;
  /** Null where no gateway is probed or its /metrics has no sandbox pool (a stored run, a cluster's gateway). */
  sandboxPool: SandboxPoolRow | null;
  curves: CurvePoint[];
  /** The held-out scores, in the order metrics.jsonl has them (empty for a run without held-out evaluation). */
  heldOut: HeldOutPoint[];
  highlights: Highlight[];
  /** Why a source could not be read at this poll (store, metrics.jsonl…), if any. */
  errors: string[];
}
