// SandboxPool (ThunderAgent §B2): asynchronous preparation takes sandbox creation and environment
// set-up off a program's critical path — sandboxes are prepared ahead for programs the
// orchestrator will start (or restore) next, bounded by a warm-pool size — and hook-based GC
// reclaims a program's sandbox (files and processes) as soon as it terminates, whatever the cause.
// A periodic leak check compares held sandboxes with live programs and reclaims strays.
import type { Registry } from "prom-client";
import type { Clock, Timer } from "../core/clock.js";
import { ArborError, CapacityError } from "../core/errors.js";
import { SandboxPoolMetrics, type AcquireOutcome } from "./pool-metrics.js";
import type { ExecOptions, ExecResult, Sandbox, SandboxProvider } from "./sandbox.js";

export interface SandboxPoolOptions {
  provider: SandboxProvider;
  clock: Clock;
  /** Sandboxes prepared (or being prepared) and not yet acquired, at most. */
  warmSize: number;
  /** Program ids waiting for a free warm slot, at most (default 4 × warmSize). */
  maxQueued?: number;
  /**
   * The environment's per-program set-up (copy the task in, install, ...). Run during preparation
   * for a named program, or at acquire for a generic warm sandbox.
   */
  setup?: (sandbox: Sandbox, programId: string) => Promise<void>;
  /** Program-independent set-up run ahead on generic warm sandboxes (prepare(count)). */
  warmup?: (sandbox: Sandbox) => Promise<void>;
  /** Metrics go to this registry (names `arbor_sandbox_pool_*`). */
  registry?: Registry;
  /** Ids of live programs; with `leakCheckMs`, held sandboxes of other programs are leaks. */
  livePrograms?: () => Iterable<string>;
  /** Period of the leak check, ms (needs `livePrograms`). */
  leakCheckMs?: number;
  /** Where a background failure (a preparation nobody waits for, a leak) is reported. */
  log?: (line: string) => void;
}

export interface PrepareResult {
  /** Preparations started now. */
  started: number;
  /** Program ids queued until a warm slot frees. */
  queued: number;
  /** Program ids already prepared, queued or acquired. */
  skipped: number;
}

/** Counters of what the pool did, for tests, the benchmark and the dashboard (the same numbers as its metrics). */
export interface PoolCounts {
  /** Prepared or being prepared, not yet acquired. */
  warm: number;
  /** Of `warm`, those whose preparation has finished (idle until a program takes one). */
  ready: number;
  queued: number;
  /** Acquired by programs and not yet reclaimed (in use). */
  live: number;
  /** Sandboxes created through the provider, and those destroyed (every path: reclaim, close, failed set-up). */
  created: number;
  destroyed: number;
  acquired: Record<AcquireOutcome, number>;
  reclaimed: number;
  leaks: number;
}

interface Prep {
  programId: string | undefined;
  promise: Promise<Sandbox>;
  ready: boolean;
  cancelled: boolean;
}

/** A warm sandbox handed to a program: the program's id, the same sandbox underneath. */
function forProgram(sb: Sandbox, programId: string): Sandbox {
  return {
    programId,
    hostWorkspace: sb.hostWorkspace,
    exec: (argv: string[], opts?: ExecOptions): Promise<ExecResult> => sb.exec(argv, opts),
    writeFile: (relPath: string, data: string | Uint8Array) => sb.writeFile(relPath, data),
    destroy: () => sb.destroy(),
  };
}

/** A pool of per-program sandboxes over one provider. */
export class SandboxPool {
  private readonly named = new Map<string, Prep>();
  private readonly generic: Prep[] = [];
  private readonly queue: string[] = [];
  private readonly active = new Map<string, Sandbox>();
  /** Programs whose sandbox is being created on the acquire path; true once reclaimed meanwhile. */
  private readonly acquiring = new Map<string, { reclaimed: boolean }>();
  private readonly metrics: SandboxPoolMetrics | undefined;
  private readonly counts_: PoolCounts = {
    warm: 0,
    ready: 0,
    queued: 0,
    live: 0,
    created: 0,
    destroyed: 0,
    acquired: { hit: 0, in_flight: 0, warm: 0, miss: 0 },
    reclaimed: 0,
    leaks: 0,
  };
  private readonly maxQueued: number;
  private leakTimer: Timer | undefined;
  private closed = false;
  private warmSeq = 0;

  constructor(private readonly o: SandboxPoolOptions) {
    if (!Number.isInteger(o.warmSize) || o.warmSize < 0) {
      throw new ArborError(`sandbox pool: warmSize must be an integer >= 0, got ${o.warmSize}`, "config");
    }
    this.maxQueued = o.maxQueued ?? 4 * o.warmSize;
    if (!Number.isInteger(this.maxQueued) || this.maxQueued < 0) {
      throw new ArborError(`sandbox pool: maxQueued must be an integer >= 0, got ${this.maxQueued}`, "config");
    }
    if (o.leakCheckMs !== undefined && !(o.leakCheckMs > 0 && o.livePrograms)) {
      throw new ArborError("sandbox pool: leakCheckMs must be > 0 and needs livePrograms", "config");
    }
    this.metrics = o.registry ? new SandboxPoolMetrics(o.registry) : undefined;
    this.reclaim = this.reclaim.bind(this);
    this.scheduleLeakCheck();
  }

  /**
   * Start preparing sandboxes ahead of need: for these program ids (created under their id, with
   * `setup` run), or `count` generic ones (with `warmup`). Bounded by the warm-pool size: ids
   * beyond it wait in a bounded queue (CapacityError past it); generic ones beyond it are not
   * started (see the result).
   */
  prepare(target: readonly string[] | number): PrepareResult {
    this.assertOpen();
    const res: PrepareResult = { started: 0, queued: 0, skipped: 0 };
    if (typeof target === "number") {
      if (!Number.isInteger(target) || target < 0) throw new ArborError(`sandbox pool: prepare count must be an integer >= 0, got ${target}`, "config");
      while (res.started < target && this.freeSlots() > 0) {
        this.startPrep(undefined);
        res.started++;
      }
      return res;
    }
    for (const id of target) {
      if (this.named.has(id) || this.active.has(id) || this.acquiring.has(id) || this.queue.includes(id)) {
        res.skipped++;
      } else if (this.freeSlots() > 0) {
        this.startPrep(id);
        res.started++;
      } else {
        if (this.queue.length >= this.maxQueued) throw new CapacityError("sandbox pool preparation queue", this.maxQueued);
        this.queue.push(id);
        res.queued++;
      }
    }
    this.updateGauges();
    return res;
  }

  /**
   * The sandbox for `programId`, set up: the one prepared for it (at once when ready), else a
   * generic warm one (set up now), else a new one. A preparation that failed rejects here.
   */
  async acquire(programId: string): Promise<Sandbox> {
    this.assertOpen();
    if (this.active.has(programId) || this.acquiring.has(programId)) {
      throw new ArborError(`sandbox pool: program ${programId} already has a sandbox`, "sandbox");
    }
    const state = { reclaimed: false };
    this.acquiring.set(programId, state);
    try {
      const sb = await this.obtain(programId);
      if (state.reclaimed || this.closed) {
        await sb.destroy();
        throw new ArborError(`sandbox pool: program ${programId} was reclaimed while its sandbox was being acquired`, "sandbox");
      }
      this.active.set(programId, sb);
      return sb;
    } finally {
      this.acquiring.delete(programId);
      this.updateGauges();
    }
  }

  private async obtain(programId: string): Promise<Sandbox> {
    const q = this.queue.indexOf(programId);
    if (q >= 0) this.queue.splice(q, 1);
    const mine = this.named.get(programId);
    if (mine) {
      this.named.delete(programId);
      this.count(mine.ready ? "hit" : "in_flight");
      this.drain();
      return mine.promise;
    }
    const warm = this.generic.find((p) => p.ready) ?? this.generic[0];
    if (warm) {
      this.generic.splice(this.generic.indexOf(warm), 1);
      this.count("warm");
      this.drain();
      const sb = forProgram(await warm.promise, programId);
      await this.runSetup(sb, programId);
      return sb;
    }
    this.count("miss");
    return this.build(programId, "on_demand");
  }

  /**
   * Hook-based GC: destroy `programId`'s sandbox (processes, files), whether acquired, prepared,
   * still being prepared or only queued. Idempotent; resolves true when something was reclaimed.
   */
  async reclaim(programId: string): Promise<boolean> {
    let found = false;
    const q = this.queue.indexOf(programId);
    if (q >= 0) {
      this.queue.splice(q, 1);
      found = true;
    }
    const pending = this.acquiring.get(programId);
    if (pending && !pending.reclaimed) {
      pending.reclaimed = true;
      found = true;
    }
    const waits: Promise<void>[] = [];
    const prep = this.named.get(programId);
    if (prep) {
      this.named.delete(programId);
      prep.cancelled = true;
      waits.push(prep.promise.then((sb) => sb.destroy(), () => undefined));
      found = true;
      this.drain();
    }
    const sb = this.active.get(programId);
    if (sb) {
      this.active.delete(programId);
      waits.push(sb.destroy());
      found = true;
    }
    this.updateGauges();
    await Promise.all(waits);
    if (prep || sb) this.countReclaimed(waits.length);
    return found;
  }

  /**
   * Compare held sandboxes with live programs; reclaim (and count) those of programs that are no
   * longer live. Returns their ids. Runs every `leakCheckMs` when configured.
   */
  async checkLeaks(): Promise<string[]> {
    if (!this.o.livePrograms) return [];
    const live = new Set(this.o.livePrograms());
    const leaked = [...this.active.keys()].filter((id) => !live.has(id));
    for (const id of leaked) {
      this.counts_.leaks++;
      this.metrics?.leaks.inc();
      this.o.log?.(`sandbox pool: program ${id} is not live but still held a sandbox: reclaiming it`);
    }
    await Promise.all(leaked.map((id) => this.reclaim(id)));
    return leaked;
  }

  /** Destroy every sandbox of the pool (prepared, in preparation, acquired); the pool is unusable after. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.leakTimer?.cancel();
    this.queue.length = 0;
    for (const s of this.acquiring.values()) s.reclaimed = true;
    const preps = [...this.named.values(), ...this.generic];
    this.named.clear();
    this.generic.length = 0;
    const actives = [...this.active.values()];
    this.active.clear();
    const results = await Promise.allSettled([
      ...preps.map((p) => {
        p.cancelled = true;
        return p.promise.then((sb) => sb.destroy(), () => undefined);
      }),
      ...actives.map((sb) => sb.destroy()),
    ]);
    this.countReclaimed(results.length);
    this.updateGauges();
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed.length > 0) {
      throw new ArborError(`sandbox pool: ${failed.length} sandbox(es) failed to tear down: ${String(failed[0]?.reason)}`, "sandbox");
    }
  }

  /**
   * This pool as a SandboxProvider, for code written against providers (the rollout): create is
   * acquire, a sandbox's destroy is reclaim (so the rollout's own teardown is the GC hook too),
   * destroyAll is close.
   */
  asProvider(): SandboxProvider {
    return {
      name: `${this.o.provider.name}+pool`,
      create: async (programId: string): Promise<Sandbox> => {
        const sb = await this.acquire(programId);
        return { ...forProgram(sb, programId), destroy: async () => void (await this.reclaim(programId)) };
      },
      destroyAll: () => this.close(),
    };
  }

  /** What the pool holds and has done so far. */
  counts(): PoolCounts {
    return { ...this.counts_, acquired: { ...this.counts_.acquired } };
  }

  /** Program ids that hold an acquired sandbox. */
  heldPrograms(): string[] {
    return [...this.active.keys()];
  }

  private freeSlots(): number {
    return this.o.warmSize - this.named.size - this.generic.length;
  }

  private startPrep(programId: string | undefined): void {
    const name = programId ?? `warm-${++this.warmSeq}`;
    const prep: Prep = { programId, promise: undefined as unknown as Promise<Sandbox>, ready: false, cancelled: false };
    prep.promise = this.build(name, "ahead", programId === undefined).then(
      (sb) => {
        prep.ready = true;
        this.updateGauges();
        return sb;
      },
      (e: unknown) => {
        // Free the slot; an acquirer already waiting on this promise gets the error.
        if (programId !== undefined && this.named.get(programId) === prep) this.named.delete(programId);
        const i = this.generic.indexOf(prep);
        if (i >= 0) this.generic.splice(i, 1);
        if (!prep.cancelled) this.o.log?.(`sandbox pool: preparing ${name} failed: ${e instanceof Error ? e.message : String(e)}`);
        this.drain();
        throw e;
      },
    );
    // Nobody may be waiting for it yet: never let a failed preparation become an unhandled rejection.
    prep.promise.catch(() => undefined);
    if (programId === undefined) this.generic.push(prep);
    else this.named.set(programId, prep);
  }

  /** Create a sandbox and set it up (warmup for a generic one); a failed set-up destroys it. */
  private async build(name: string, mode: "ahead" | "on_demand", generic = false): Promise<Sandbox> {
    const start = this.o.clock.now();
    const sb = this.tracked(await this.o.provider.create(name));
    try {
      if (generic) await this.o.warmup?.(sb);
      else await this.runSetup(sb, name);
    } catch (e) {
      await sb.destroy().catch(() => undefined);
      throw e;
    }
    this.metrics?.prepareSeconds.observe({ mode }, (this.o.clock.now() - start) / 1000);
    return sb;
  }

  /** `sb` counted as created now and as destroyed at its first completed destroy (whoever calls it). */
  private tracked(sb: Sandbox): Sandbox {
    this.counts_.created++;
    this.metrics?.created.inc();
    let destroyed = false;
    return {
      programId: sb.programId,
      hostWorkspace: sb.hostWorkspace,
      exec: (argv: string[], opts?: ExecOptions): Promise<ExecResult> => sb.exec(argv, opts),
      writeFile: (relPath: string, data: string | Uint8Array) => sb.writeFile(relPath, data),
      destroy: async () => {
        await sb.destroy();
        if (destroyed) return;
        destroyed = true;
        this.counts_.destroyed++;
        this.metrics?.destroyed.inc();
      },
    };
  }

  private async runSetup(sb: Sandbox, programId: string): Promise<void> {
    if (!this.o.setup) return;
    try {
      await this.o.setup(sb, programId);
    } catch (e) {
      await sb.destroy().catch(() => undefined);
      throw e;
    }
  }

  /** Start queued preparations while warm slots are free. */
  private drain(): void {
    while (!this.closed && this.queue.length > 0 && this.freeSlots() > 0) {
      this.startPrep(this.queue.shift() as string);
    }
    this.updateGauges();
  }

  private count(outcome: AcquireOutcome): void {
    this.counts_.acquired[outcome]++;
    this.metrics?.acquired.inc({ outcome });
  }

  private countReclaimed(n: number): void {
    this.counts_.reclaimed += n;
    this.metrics?.reclaimed.inc(n);
  }

  private updateGauges(): void {
    const preps = [...this.named.values(), ...this.generic];
    this.counts_.warm = preps.length;
    this.counts_.ready = preps.filter((p) => p.ready).length;
    this.counts_.queued = this.queue.length;
    this.counts_.live = this.active.size;
    this.metrics?.warm.set(this.counts_.warm);
    this.metrics?.idle.set(this.counts_.ready);
    this.metrics?.queued.set(this.counts_.queued);
    this.metrics?.live.set(this.counts_.live);
  }

  private scheduleLeakCheck(): void {
    const ms = this.o.leakCheckMs;
    if (ms === undefined || this.closed) return;
    this.leakTimer = this.o.clock.setTimer(ms, () => {
      this.checkLeaks()
        .catch((e: unknown) => this.o.log?.(`sandbox pool: leak check failed: ${e instanceof Error ? e.message : String(e)}`))
        .finally(() => this.scheduleLeakCheck());
    });
  }

  private assertOpen(): void {
    if (this.closed) throw new ArborError("sandbox pool is closed", "sandbox");
  }
}

/** Create a sandbox pool over `provider` (see {@link SandboxPoolOptions}). */
export function createSandboxPool(opts: SandboxPoolOptions): SandboxPool {
  return new SandboxPool(opts);
}
