// Where the dashboard's numbers come from: a run's store (programs, trajectories, rewards: `arbor inspect`'s
// code), its output folder (metrics.jsonl for the curves; a validation report.json for dropped tasks) and,
// while the run is live, its gateway (the program table's GET /programs for state and phase, /metrics for
// pauses and restores, and the sandbox pool's counters the embedded run registers there) and engines (/metrics, /health). One `poll()` reads them all into one snapshot; the
// highlights (stuck programs, unhealthy engines, hygiene violations, validation drops) are derived from it.
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Clock } from "../../core/clock.js";
import { heldOutOfLine, numberField, parseMetricsLines } from "../../loop/metrics-lines.js";
import type { TrajectoryStore } from "../../store/trajectory-store.js";
import { summarizeStore, trajectoryView, type RunSummary, type TrajectoryView } from "../inspect.js";
import { runTokenizer } from "../run-tokenizer.js";
import type { CurvePoint, EngineRow, HeldOutPoint, GatewayRow, Highlight, ProgramRow, RunRow, SandboxPoolRow } from "./dashboard-types.js";
import { gatewayPrograms, probeEngine, probeGateway, type GatewayProgram } from "./service-probe.js";

/** Most metrics.jsonl lines drawn (the last ones). */
export const MAX_CURVE_POINTS = 5_000;
/** Largest metrics.jsonl or report.json read. */
const MAX_FILE_BYTES = 64 * 1024 * 1024;

/** One poll of every source. */
export interface Snapshot {
  runs: RunRow[];
  programs: ProgramRow[];
  engines: EngineRow[];
  gateway: GatewayRow | null;
  sandboxPool: SandboxPoolRow | null;
  curves: CurvePoint[];
  heldOut: HeldOutPoint[];
  highlights: Highlight[];
  errors: string[];
}

/** What the dashboard server reads: a run's sources (`RunSource`), or a simulated one in tests. */
export interface DashboardSource {
  readonly mode: "live" | "store";
  poll(): Promise<Snapshot>;
  /** One program's trajectory as turns (tokens decoded), or undefined when the store has no such program. */
  program(id: string): Promise<TrajectoryView | undefined>;
}

export interface RunSourceOptions {
  store: TrajectoryStore;
  /** The run's output folder (metrics.jsonl); absent: no curves. */
  runDir?: string;
  /** A live run's gateway; absent: the store's facts only. */
  gatewayUrl?: string;
  gatewayAdminToken?: string;
  /** A live run's engines by name and URL (Arbor's engine or vLLM-compatible /metrics). */
  engines?: readonly { name: string; url: string }[];
  /** An `arbor validate` report.json whose dropped tasks are highlighted. */
  validationReport?: string;
  /** An active program with no call activity for this long is highlighted as stuck (default 120 s). */
  stuckMs?: number;
  /**
   * The store is read again at most this often (default 3 s; the gateway and engines at every poll): reading every
   * trajectory of a large run is the poll's one cost that grows with the run, and a live run shares its store.
   */
  storeRefreshMs?: number;
  clock: Clock;
}

/** The sources of one run. */
export class RunSource implements DashboardSource {
  readonly mode: "live" | "store";
  private readonly stuckMs: number;
  private stored: { at: number; runs: RunSummary[] } | undefined;

  constructor(private readonly o: RunSourceOptions) {
    this.mode = o.gatewayUrl !== undefined ? "live" : "store";
    this.stuckMs = o.stuckMs ?? 120_000;
    if (!(this.stuckMs > 0)) throw new Error(`dashboard: stuckMs must be > 0, got ${this.stuckMs}`);
    if (o.storeRefreshMs !== undefined && !(o.storeRefreshMs >= 0)) throw new Error(`dashboard: storeRefreshMs must be >= 0, got ${o.storeRefreshMs}`);
  }

  async poll(): Promise<Snapshot> {
    const errors: string[] = [];
    const [stored, live, engines, probed] = await Promise.all([
      this.storeSummary().catch((e: unknown) => {
        errors.push(`store: ${(e as Error).message}`);
        return [];
      }),
      this.o.gatewayUrl !== undefined
        ? gatewayPrograms(this.o.gatewayUrl, this.o.gatewayAdminToken).catch((e: unknown) => {
            errors.push(`gateway programs: ${(e as Error).message}`);
            return [] as GatewayProgram[];
          })
        : Promise.resolve([] as GatewayProgram[]),
      Promise.all((this.o.engines ?? []).map((e) => probeEngine(e.name, e.url))),
      this.o.gatewayUrl !== undefined ? probeGateway(this.o.gatewayUrl, this.o.gatewayAdminToken) : Promise.resolve(null),
    ]);
    const gateway = probed?.gateway ?? null;
    const liveById = new Map(live.map((p) => [p.id, p]));
    const programs: ProgramRow[] = [];
    const runs: RunRow[] = [];
    for (const run of stored) {
      const { programs: ps, ...rest } = run;
      runs.push(rest);
      for (const p of ps) {
        const g = liveById.get(p.id);
        liveById.delete(p.id);
        programs.push({ ...p, runId: run.id, ...liveFields(g) });
      }
    }
    // Programs the gateway holds that the store's snapshot does not show yet (created since it was read).
    for (const g of liveById.values()) {
      programs.push({ id: g.id, runId: "", groupId: "", iteration: null, heldOutVersion: null, superseded: false, taskId: "", state: g.state, termination: null, terminationDetail: null, reward: null, components: null, calls: g.calls, toolCalls: 0, promptTokens: 0, outputTokens: 0, ...liveFields(g) });
    }
    const { curves, heldOut } = this.curves(errors);
    const highlights = [...this.stuck(programs, live, runs), ...hygiene(programs), ...engines.filter((e) => !e.healthy).map((e): Highlight => ({ kind: "unhealthy-engine", subject: e.name, reason: e.error ?? "unhealthy" })), ...this.validationDrops(errors)];
    if (gateway && !gateway.healthy) highlights.push({ kind: "unhealthy-engine", subject: "gateway", reason: gateway.error ?? "unhealthy" });
    return { runs, programs, engines, gateway, sandboxPool: probed?.sandboxPool ?? null, curves, heldOut, highlights, errors };
  }

  /** The store's runs and programs, read again when storeRefreshMs have passed since the last read. */
  private async storeSummary(): Promise<RunSummary[]> {
    const now = this.o.clock.now();
    if (this.stored === undefined || now - this.stored.at >= (this.o.storeRefreshMs ?? 3_000)) this.stored = { at: now, runs: await summarizeStore(this.o.store) };
    return this.stored.runs;
  }

  async program(id: string): Promise<TrajectoryView | undefined> {
    const t = await this.o.store.getTrajectory(id);
    if (!t) return undefined;
    const run = await this.o.store.getRun(t.program.runId);
    return trajectoryView(t, runTokenizer(run?.configJson ?? "{}"));
  }

  /** Active programs the gateway has seen no call activity from for stuckMs; active programs of an ended run. */
  private stuck(programs: ProgramRow[], live: GatewayProgram[], runs: RunRow[]): Highlight[] {
    const now = this.o.clock.now();
    const out: Highlight[] = [];
    for (const g of live) {
      if (g.state !== "active") continue;
      const idle = now - g.lastActivity;
      if (idle >= this.stuckMs) out.push({ kind: "stuck-program", subject: g.id, reason: `no call activity for ${Math.round(idle / 1000)} s (${g.phase}, ${g.inFlight} call${g.inFlight === 1 ? "" : "s"} in flight)` });
    }
    const ended = new Set(runs.filter((r) => r.endedAt !== null).map((r) => r.id));
    for (const p of programs) {
      if (p.state === "active" && ended.has(p.runId)) out.push({ kind: "stuck-program", subject: p.id, reason: `still active in run ${p.runId}, which ended` });
    }
    return out;
  }

  /** The curves' points and the held-out scores of metrics.jsonl. */
  private curves(errors: string[]): { curves: CurvePoint[]; heldOut: HeldOutPoint[] } {
    const out: CurvePoint[] = [];
    const heldOut: HeldOutPoint[] = [];
    if (this.o.runDir === undefined) return { curves: out, heldOut };
    const path = join(this.o.runDir, "metrics.jsonl");
    const text = readBounded(path, errors);
    if (text === undefined) return { curves: out, heldOut };
    for (const { fields: r } of parseMetricsLines(text).slice(-MAX_CURVE_POINTS)) {
      const score = heldOutOfLine(r);
      if (score !== undefined && (r.kind === "held-out" || r.kind === "iteration")) heldOut.push(score);
      if (r.kind !== "iteration" && r.kind !== "step") continue;
      const num = (k: string): number | null => numberField(r, k);
      out.push({ kind: r.kind, index: num("index") ?? 0, runId: String(r.runId ?? ""), meanReward: num("meanReward"), meanOutputTokens: num("meanOutputTokens"), loss: num("loss"), gradNorm: num("gradNorm"), kl: num("kl"), entropy: num("entropy"), policyVersion: num("policyVersion") ?? 0 });
    }
    return { curves: out, heldOut };
  }

  private validationDrops(errors: string[]): Highlight[] {
    if (this.o.validationReport === undefined) return [];
    const text = readBounded(this.o.validationReport, errors, true);
    if (text === undefined) return [];
    try {
      const report = JSON.parse(text) as { tasks?: { id: string; kept: boolean; reasons?: string[] }[] };
      return (report.tasks ?? []).filter((t) => !t.kept).map((t) => ({ kind: "validation-drop", subject: t.id, reason: (t.reasons ?? []).join(", ") || "dropped" }));
    } catch (e) {
      errors.push(`validation report ${this.o.validationReport}: ${(e as Error).message}`);
      return [];
    }
  }
}

function liveFields(g: GatewayProgram | undefined): Pick<ProgramRow, "phase" | "inFlight" | "contextTokens" | "backend" | "lastActivity"> {
  if (!g || g.state !== "active") return { phase: null, inFlight: g ? g.inFlight : null, contextTokens: g ? g.contextTokens : null, backend: g?.backend ?? null, lastActivity: g?.lastActivity ?? null };
  return { phase: g.phase, inFlight: g.inFlight, contextTokens: g.contextTokens, backend: g.backend, lastActivity: g.lastActivity };
}

/** Programs that ended for touching what they must not see, with the environment's detail. */
function hygiene(programs: ProgramRow[]): Highlight[] {
  return programs.filter((p) => p.termination === "hygiene_violation").map((p) => ({ kind: "hygiene-violation", subject: p.id, reason: p.terminationDetail ?? "hygiene violation (no detail recorded)" }));
}

/** The file's text, undefined when it does not exist (yet) or is too large (then said in `errors`). */
function readBounded(path: string, errors: string[], required = false): string | undefined {
  if (!existsSync(path)) {
    if (required) errors.push(`${path}: no such file`);
    return undefined;
  }
  const size = statSync(path).size;
  if (size > MAX_FILE_BYTES) {
    errors.push(`${path}: ${size} bytes, more than the ${MAX_FILE_BYTES} read`);
    return undefined;
  }
  return readFileSync(path, "utf8");
}
