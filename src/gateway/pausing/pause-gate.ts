// The HTTP-side shell of ThunderAgent's state-aware pause/restore (TECHNIQUES §B1): it feeds the
// I/O-free PauseController with the gateway's call starts and ends, holds calls of paused programs,
// and carries out the controller's decisions, with the engine's own pause/restore where the backend
// has one (built-in engine, llama-server slots) and at the proxy otherwise.
import type { Registry } from "prom-client";
import { BackendHttpError, isTokenBackend, type Backend, type TokenBackend } from "../../backends/backend.js";
import { canMoveProgramKv, moveProgramKv, type KvOrigin } from "../../backends/program-kv-move.js";
import type { Clock } from "../../core/clock.js";
import { ArborError, CapacityError } from "../../core/errors.js";
import { untilAborted } from "../../core/until-aborted.js";
import type { CallGate } from "./call-gate.js";
import type { DecayScope, PauseConfig, RestorePlacement } from "./pause-config.js";
import { PauseController, type PauseAction } from "./pause-controller.js";
import { PauseGateMetrics } from "./pause-gate-metrics.js";

/** The gateway's `pausing` settings (src/core/config.ts); every field has a default. */
export interface PauseGateConfig {
  /** Pause above λmax·C (default 1.0). */
  lambdaMax?: number;
  /** Restore into backends below λmin·C (default 1.0). */
  lambdaMin?: number;
  /** Scheduling period Δt, ms (default 5000). */
  tickMs?: number;
  /** A call held longer than this is force-resumed whatever the capacity (default 1_800_000). */
  forceResumeMs?: number;
  /** Calls held at once over all programs; one more is refused with a CapacityError (default 10_000). */
  maxHeldCalls?: number;
  /** Where restored programs go among backends with room (default "most-free"). */
  restorePacking?: RestorePlacement;
  /** Tokens reserved per active program (default 100). */
  bufferPerProgram?: number;
  /** Where acting-token decay applies (default "usage"). */
  decayScope?: DecayScope;
  /** KV capacity in tokens per backend name; backends not named here are asked (scrapeMetrics). */
  capacities?: Readonly<Record<string, number>>;
}

export interface PauseGateOptions {
  backends: readonly Backend[];
  clock: Clock;
  /** Where the gate's metrics are registered (the gateway's own registry is fine: names do not clash). */
  registry: Registry;
  config?: PauseGateConfig;
  /** Where engine failures are reported (default: one line on stderr). */
  log?: (line: string) => void;
}

export const DEFAULT_MAX_HELD_CALLS = 10_000;

type PauseCapable = TokenBackend & Required<Pick<TokenBackend, "pause" | "restore">>;

interface HeldCall {
  programId: string;
  resolve(backend: string): void;
  reject(err: unknown): void;
  /** Set when a restore/admit action has taken this call: the backend it goes to once the engine is ready. */
  grantedTo: string | null;
  detach(): void;
}

/** A program whose KV an engine holds for it while paused. */
interface EngineSaved {
  backend: string;
  /** Controller context tokens at pause time (what an engine restore spares re-prefilling). */
  tokens: number;
  /** The pause call failed: the engine may or may not hold the program; restore is best effort. */
  uncertain: boolean;
}

function pauseCapable(b: Backend | undefined): b is PauseCapable {
  return (
    b !== undefined &&
    isTokenBackend(b) &&
    b.capabilities.pauseRestore &&
    typeof b.pause === "function" &&
    typeof b.restore === "function"
  );
}

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** Build the controller's capacities: given ones first, the rest from each backend's metrics. */
async function resolveCapacities(backends: readonly Backend[], given: Readonly<Record<string, number>>): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const b of backends) {
    const fixed = given[b.name];
    if (fixed !== undefined) {
      out.set(b.name, fixed);
      continue;
    }
    if (!isTokenBackend(b)) {
      throw new ArborError(`pausing.capacities.${b.name}: backend '${b.name}' reports no metrics; give its KV capacity in tokens`, "config");
    }
    const cap = (await b.scrapeMetrics()).kvCapacityTokens;
    if (cap === null) {
      throw new ArborError(`pausing.capacities.${b.name}: backend '${b.name}' reports no KV capacity (kvCapacityTokens); give it in tokens`, "config");
    }
    out.set(b.name, cap);
  }
  for (const name of Object.keys(given)) {
    if (!backends.some((b) => b.name === name)) throw new ArborError(`pausing.capacities.${name}: no backend of that name`, "config");
  }
  return out;
}

/**
 * ThunderAgent pausing for the gateway. Create with {@link PauseGate.create} (it learns capacities),
 * then call it around every upstream call ({@link CallGate}). Ticks every `tickMs` on the clock.
 */
export class PauseGate implements CallGate {
  readonly controller: PauseController;
  readonly metrics: PauseGateMetrics;
  readonly maxHeldCalls: number;
  private readonly backends: Map<string, Backend>;
  private readonly fixedCapacities: Readonly<Record<string, number>>;
  private readonly log: (line: string) => void;
  /** Calls held per program, in arrival order (granted ones included until they go). */
  private readonly held = new Map<string, HeldCall[]>();
  private heldCount = 0;
  private readonly saved = new Map<string, EngineSaved>();
  /** Backends that refused to share a program's KV (no L3 tier): their programs are not moved again. */
  private readonly unshared = new Set<string>();
  /** Per program, the tail of its chain of engine operations (pause/restore run in decision order). */
  private readonly ops = new Map<string, Promise<void>>();
  private closed = false;

  /** Resolve capacities (scraping backends that were not given one), then build and start the gate. */
  static async create(opts: PauseGateOptions): Promise<PauseGate> {
    const caps = await resolveCapacities(opts.backends, opts.config?.capacities ?? {});
    return new PauseGate(opts, caps);
  }

  private constructor(opts: PauseGateOptions, capacities: Map<string, number>) {
    const cfg = opts.config ?? {};
    const maxHeld = cfg.maxHeldCalls ?? DEFAULT_MAX_HELD_CALLS;
    if (!Number.isInteger(maxHeld) || maxHeld < 0) {
      throw new ArborError(`pausing.maxHeldCalls: must be an integer >= 0, got ${JSON.stringify(maxHeld)}`, "config");
    }
    this.maxHeldCalls = maxHeld;
    this.backends = new Map(opts.backends.map((b) => [b.name, b]));
    this.fixedCapacities = cfg.capacities ?? {};
    this.log = opts.log ?? ((line) => process.stderr.write(`gateway pausing: ${line}\n`));
    const controllerConfig: Partial<PauseConfig> = {};
    if (cfg.lambdaMax !== undefined) controllerConfig.lambdaMax = cfg.lambdaMax;
    if (cfg.lambdaMin !== undefined) controllerConfig.lambdaMin = cfg.lambdaMin;
    if (cfg.tickMs !== undefined) controllerConfig.intervalMs = cfg.tickMs;
    if (cfg.forceResumeMs !== undefined) controllerConfig.forceResumeMs = cfg.forceResumeMs;
    if (cfg.restorePacking !== undefined) controllerConfig.placement = cfg.restorePacking;
    if (cfg.bufferPerProgram !== undefined) controllerConfig.bufferPerProgram = cfg.bufferPerProgram;
    if (cfg.decayScope !== undefined) controllerConfig.decayScope = cfg.decayScope;
    this.controller = new PauseController({
      clock: opts.clock,
      backends: [...capacities].map(([name, capacity]) => ({ name, capacity })),
      config: controllerConfig,
    });
    this.metrics = new PauseGateMetrics(opts.registry, this.controller, () => this.heldCount);
    this.controller.start((actions) => this.execute(actions));
  }

  /** Calls held now (waiting for a restore or admit, or for the engine to finish restoring). */
  get heldCalls(): number {
    return this.heldCount;
  }

  /** Ask the backends without a configured capacity again (e.g. after an engine restart); failures are logged. */
  async refreshCapacities(): Promise<void> {
    for (const b of this.backends.values()) {
      if (this.fixedCapacities[b.name] !== undefined || !isTokenBackend(b)) continue;
      try {
        const cap = (await b.scrapeMetrics()).kvCapacityTokens;
        if (cap !== null) this.controller.setCapacity(b.name, cap);
      } catch (e) {
        this.log(`capacity refresh of backend '${b.name}' failed: ${message(e)}`);
      }
    }
  }

  /**
   * A backend left rotation or came back (the gateway's health loop): placement avoids it while it is
   * out (PauseController.setBackendUp); when it comes back, capacities are asked again (it may have
   * restarted with another KV size).
   */
  setBackendUp(backend: string, up: boolean): void {
    // Closed: no more placements, and no engine operation may start after close() has waited for them.
    if (this.closed) return;
    this.execute(this.controller.setBackendUp(backend, up));
    if (up) void this.refreshCapacities();
  }

  async beforeCall(programId: string, promptTokens: number, signal?: AbortSignal, preferredBackend?: string): Promise<string> {
    if (this.closed) throw new ArborError("gateway pausing is closed; no more calls", "closed");
    signal?.throwIfAborted();
    const decision = this.controller.onCallStart(programId, preferredBackend ?? this.leastUsed(), promptTokens);
    if (decision.kind === "go") {
      // An engine restore of this program may still be under way: the call goes after it.
      const pending = this.ops.get(programId);
      if (pending) {
        try {
          await (signal ? untilAborted(pending, signal) : pending);
        } catch (e) {
          this.onCallAbort(programId);
          throw e;
        }
      }
      return decision.backend;
    }
    if (this.heldCount >= this.maxHeldCalls) {
      this.controller.onHeldCallAbort(programId);
      this.metrics.heldCallsEnded.inc({ outcome: "rejected_full" });
      throw new CapacityError("pausing.maxHeldCalls (calls held at the gateway while their program is paused)", this.maxHeldCalls);
    }
    return this.hold(programId, signal);
  }

  afterCall(programId: string, totalTokens: number): void {
    this.execute(this.controller.onCallEnd(programId, totalTokens));
  }

  onCallAbort(programId: string): void {
    this.execute(this.controller.onCallAbort(programId));
  }

  onRelease(programId: string): void {
    this.controller.onRelease(programId);
    const calls = this.held.get(programId) ?? [];
    this.held.delete(programId);
    for (const h of calls) this.endHeld(h, "program_released", new ArborError(`program ${programId} was released while its call was held`, "program_released"));
    // After any engine pause still under way: the engine would otherwise hold the program paused
    // for good. Restoring lets its KV go the engine's usual way.
    this.chain(programId, async () => {
      const s = this.saved.get(programId);
      if (!s) return;
      this.saved.delete(programId);
      await this.engineRestore(programId, s, null);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.controller.stop();
    for (const [id, calls] of [...this.held]) {
      this.held.delete(id);
      for (const h of calls) this.endHeld(h, "closed", new ArborError("gateway pausing closed while the call was held", "closed"));
    }
    await Promise.all([...this.ops.values()]);
  }

  // ---- internals ----

  private hold(programId: string, signal?: AbortSignal): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      const onAbort = (): void => {
        const list = this.held.get(programId) ?? [];
        const i = list.indexOf(h);
        if (i < 0) return;
        list.splice(i, 1);
        if (list.length === 0) this.held.delete(programId);
        // A granted call already counts as in flight in the controller.
        if (h.grantedTo !== null) this.onCallAbort(programId);
        else this.controller.onHeldCallAbort(programId);
        this.endHeld(h, "aborted", signal?.reason);
      };
      const h: HeldCall = {
        programId,
        resolve,
        reject,
        grantedTo: null,
        detach: () => signal?.removeEventListener("abort", onAbort),
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      const list = this.held.get(programId) ?? [];
      list.push(h);
      this.held.set(programId, list);
      this.heldCount++;
    });
  }

  private endHeld(h: HeldCall, outcome: string, err: unknown): void {
    h.detach();
    this.heldCount--;
    this.metrics.heldCallsEnded.inc({ outcome });
    h.reject(err);
  }

  private leastUsed(): string {
    let best = "";
    let ratio = Infinity;
    for (const u of this.controller.usage()) {
      if (!this.controller.placeable(u.backend)) continue;
      const r = u.projectedUsage / u.capacity;
      if (r < ratio) {
        best = u.backend;
        ratio = r;
      }
    }
    return best;
  }

  /** Run `fn` after the program's earlier engine operations; errors are logged, never thrown. */
  private chain(programId: string, fn: () => Promise<void>): void {
    const prev = this.ops.get(programId) ?? Promise.resolve();
    const next = prev.then(fn).catch((e: unknown) => this.log(`program ${programId}: ${message(e)}`));
    this.ops.set(programId, next);
    void next.then(() => {
      if (this.ops.get(programId) === next) this.ops.delete(programId);
    });
  }

  private execute(actions: readonly PauseAction[]): void {
    for (const a of actions) {
      if (a.kind === "pause") {
        // Read the footprint now: by the time the engine answers, the program may have moved on.
        const tokens = this.controller.get(a.programId)?.contextTokens ?? 0;
        this.chain(a.programId, () => this.runPause(a, tokens));
        continue;
      }
      // Take the released calls now, so that an abort from here on is an in-flight abort.
      const granted = (this.held.get(a.programId) ?? []).slice(0, a.releasedCalls);
      for (const h of granted) h.grantedTo = a.backend;
      if (granted.length !== a.releasedCalls) {
        this.log(`program ${a.programId}: ${a.kind} released ${a.releasedCalls} calls but ${granted.length} were held`);
      }
      if (a.reason === "force-resume") this.metrics.forceResumes.inc();
      this.chain(a.programId, () => this.runRestore(a, granted));
    }
  }

  private async runPause(a: PauseAction, tokens: number): Promise<void> {
    const b = this.backends.get(a.backend);
    if (!pauseCapable(b)) {
      this.metrics.pauses.inc({ backend: a.backend, mode: "proxy" });
      return;
    }
    try {
      await b.pause(a.programId);
      this.saved.set(a.programId, { backend: a.backend, tokens, uncertain: false });
      this.metrics.pauses.inc({ backend: a.backend, mode: "engine" });
    } catch (e) {
      // The program stays paused at the proxy; its next call re-prefills wherever it goes.
      this.metrics.engineFailures.inc({ backend: a.backend, op: "pause" });
      this.metrics.pauses.inc({ backend: a.backend, mode: "proxy" });
      this.log(`engine pause of program ${a.programId} on backend '${a.backend}' failed, holding at the proxy: ${message(e)}`);
      this.saved.set(a.programId, { backend: a.backend, tokens, uncertain: true });
    }
  }

  private async runRestore(a: PauseAction, granted: readonly HeldCall[]): Promise<void> {
    const s = this.saved.get(a.programId);
    let mode: "engine" | "proxy" = "proxy";
    if (s) {
      this.saved.delete(a.programId);
      if (await this.engineRestore(a.programId, s, a.backend)) {
        mode = "engine";
        this.metrics.recomputeAvoided.inc(s.tokens);
      }
    }
    if (a.kind === "admit") this.metrics.admits.inc({ backend: a.backend });
    else this.metrics.restores.inc({ backend: a.backend, mode });
    for (const h of granted) {
      const list = this.held.get(a.programId);
      const i = list ? list.indexOf(h) : -1;
      // Aborted, released or closed meanwhile: already answered.
      if (!list || i < 0) continue;
      list.splice(i, 1);
      if (list.length === 0) this.held.delete(a.programId);
      h.detach();
      this.heldCount--;
      this.metrics.heldCallsEnded.inc({ outcome: "released" });
      h.resolve(h.grantedTo as string);
    }
  }

  /**
   * Restore a program on the engine that saved it. True when its KV is reloaded where it will run
   * (`target`): only then is re-prefill avoided. A program restored elsewhere has its KV moved there
   * first where the engines share a tier (the global KV pool: {@link PauseGate.moveKv}); its origin is
   * restored either way, so that the engine stops holding it.
   */
  private async engineRestore(programId: string, s: EngineSaved, target: string | null): Promise<boolean> {
    const b = this.backends.get(s.backend);
    if (!pauseCapable(b)) return false;
    const moved = target !== null && target !== s.backend && !s.uncertain && (await this.moveKv(programId, b, s.backend, target));
    try {
      await b.restore(programId);
      return moved || (!s.uncertain && target === s.backend);
    } catch (e) {
      // After a failed pause the engine may not know the program: no failure to report.
      if (!s.uncertain) {
        this.metrics.engineFailures.inc({ backend: s.backend, op: "restore" });
        this.log(`engine restore of program ${programId} on backend '${s.backend}' failed; its next call re-prefills: ${message(e)}`);
      }
      return moved;
    }
  }

  /**
   * Move a paused program's KV from its origin to `target` through the tier they share (Forge's and
   * Mooncake's global pool): the origin puts it there, the target's restore learns of it. True when
   * the target says it can load the KV. An origin that has no shared tier (HTTP 400) is not asked again.
   */
  private async moveKv(programId: string, origin: PauseCapable, from: string, to: string): Promise<boolean> {
    const t = this.backends.get(to);
    if (!pauseCapable(t) || !canMoveProgramKv(origin, t) || this.unshared.has(from)) return false;
    try {
      const loaded = (await moveProgramKv(origin as KvOrigin, t, programId)) > 0;
      if (loaded) this.metrics.kvMoves.inc({ from, to });
      return loaded;
    } catch (e) {
      if (e instanceof BackendHttpError && e.status === 400) {
        this.unshared.add(from);
        this.log(`backend '${from}' shares no KV tier with other engines (${message(e)}); programs it paused re-prefill where they move`);
      } else {
        this.metrics.engineFailures.inc({ backend: from, op: "move" });
        this.log(`moving the KV of program ${programId} from backend '${from}' to '${to}' failed; its next call re-prefills: ${message(e)}`);
      }
      return false;
    }
  }
}
