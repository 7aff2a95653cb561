// The engine's current policy: which executor serves new requests, at which policy version, and
// the in-flight requests of every version still running. Weight switches, sleep and wake-up are
// serialised here and happen between steps (JavaScript runs one step continuation at a time).
import { stopTokenIds } from "../../model/chat-template.js";
import { Vocab } from "../../model/vocab.js";
import type { Executor, ExecutorStats } from "../executor.js";
import { HttpError, invalidRequest } from "../openai-errors.js";
import { ResumingExecutor, type ResumableHold } from "./resuming-executor.js";

/**
 * What in-flight requests do when the weights change: finish on the old version, end with finish
 * reason `abort`, or stop between steps and resume on the new version (one answer covering both).
 */
export type InFlightPolicy = "finish" | "abort" | "resume";

/** One request's hold on the executor that admitted it. */
export interface SlotLease {
  /** The request's executor: it follows the request to a new version on an `in_flight: "resume"` switch. */
  readonly executor: Executor;
  /**
   * The policy version this request is generated with: fixed unless a resume switch moves the
   * request to a newer one (then the version of its last tokens).
   */
  readonly policyVersion: number;
  /** Aborted on client disconnect ({@link abort}) or by a weight switch with `in_flight: "abort"`. */
  readonly signal: AbortSignal;
  /** True when the abort came from a weight switch (the answer is still sent, finish reason `abort`). */
  readonly abortedBySwitch: boolean;
  /** Abort this request (its client went away). */
  abort(): void;
  /** Idempotent; the last release of a retired version closes its executor. */
  release(): void;
  /** The policy version of each of the first `count` output tokens (Arbor's `token_policy_versions`). */
  tokenPolicyVersions(count: number): number[];
}

export interface ExecutorSlotOptions {
  executor: Executor;
  policyVersion: number;
  modelPath: string;
  /** Whether the slot closes `executor` (false for an injected one). */
  owned: boolean;
  /** Load the GGUF at a path (weight switch, wake-up); executors it returns are owned. */
  load: (modelPath: string) => Promise<Executor>;
  /** Check a freshly loaded executor (e.g. its vocabulary); throw to refuse it. */
  check?: (executor: Executor, modelPath: string) => void;
  /** Tokens that end a generation (default: Arbor's), so a resumed request that ended just finishes. */
  stopTokenIds?: Iterable<number>;
  /**
   * Old versions kept loaded at once while their requests finish (default 2): at a switch beyond it, the oldest
   * one's requests are aborted (as `in_flight: abort` does), so its executor closes. Weight switches faster than
   * the longest generations would otherwise keep a whole model and its KV per version resident.
   */
  maxRetiringVersions?: number;
}

/** ExecutorSlotOptions.maxRetiringVersions unless given. */
export const DEFAULT_MAX_RETIRING_VERSIONS = 2;

interface Generation {
  executor: Executor;
  readonly policyVersion: number;
  readonly modelPath: string;
  owned: boolean;
  /** Whether the executor was closed by sleep and must be reloaded by wake-up. */
  released: boolean;
  readonly active: Set<RequestHold>;
  drained?: () => void;
}

interface RequestHold {
  /** The client's abort: disconnect, shutdown, or a switch with `in_flight: "abort"`. */
  readonly controller: AbortController;
  bySwitch: boolean;
  /** The generation the request runs on (changes when it resumes on a new version). */
  gen: Generation;
  /** Set while the request runs on `gen`'s executor; a resume switch aborts it. */
  segment: AbortController | null;
  /** A resume switch stopped the running segment. */
  resume: boolean;
}

export interface LoadWeightsResult {
  policy_version: number;
  previous_policy_version: number;
  model_path: string;
  in_flight: InFlightPolicy;
  /** Requests still running on the previous version when the switch happened. */
  in_flight_requests: number;
}

/** The counters of ExecutorStats (each only grows on one executor), summed over the executors a slot served. */
export type ExecutorCounters = Pick<ExecutorStats, "prefixCacheQueries" | "prefixCacheHits" | "preemptions" | "specDecode">;

/** Add `s`'s counters into `into` (a counter none of them has stays absent). */
function addCounters(into: ExecutorCounters, s: ExecutorCounters): void {
  for (const k of ["prefixCacheQueries", "prefixCacheHits", "preemptions"] as const) {
    const v = s[k];
    if (v !== undefined) into[k] = (into[k] ?? 0) + v;
  }
  const d = s.specDecode;
  if (d === undefined) return;
  const t = (into.specDecode ??= { numDrafts: 0, numDraftTokens: 0, numAcceptedTokens: 0 });
  t.numDrafts += d.numDrafts;
  t.numDraftTokens += d.numDraftTokens;
  t.numAcceptedTokens += d.numAcceptedTokens;
  if (d.draftServiceFailures !== undefined) t.draftServiceFailures = (t.draftServiceFailures ?? 0) + d.draftServiceFailures;
  if (d.draftServiceLocalSteps !== undefined) t.draftServiceLocalSteps = (t.draftServiceLocalSteps ?? 0) + d.draftServiceLocalSteps;
}

/** Holds the serving executor; see the file header. */
export class ExecutorSlot {
  private gen: Generation;
  /** The counters of the executors this slot no longer serves (drained after a switch, or closed by sleep). */
  private readonly pastCounters: ExecutorCounters = {};
  private readonly retiring = new Set<Generation>();
  private readonly retired: Promise<void>[] = [];
  private ops: Promise<unknown> = Promise.resolve();
  private sleepLevel: 0 | 1 | 2 = 0;
  private closed = false;
  private readonly stopIds: ReadonlySet<number>;

  constructor(private readonly opts: ExecutorSlotOptions) {
    this.gen = newGeneration(opts.executor, opts.policyVersion, opts.modelPath, opts.owned);
    this.stopIds = new Set(opts.stopTokenIds ?? stopTokenIds(new Vocab()));
  }

  /** The executor new requests go to (closed while sleeping). */
  get executor(): Executor {
    return this.gen.executor;
  }

  get policyVersion(): number {
    return this.gen.policyVersion;
  }

  get modelPath(): string {
    return this.gen.modelPath;
  }

  /** True from the moment /sleep is accepted until wake-up has reloaded the executor. */
  get sleeping(): boolean {
    return this.sleepLevel !== 0;
  }

  /** Requests running on any version. */
  get inFlight(): number {
    let n = this.gen.active.size;
    for (const g of this.retiring) n += g.active.size;
    return n;
  }

  /** Load summed over the current and the retiring versions (zero while asleep). */
  stats(): ExecutorStats {
    const cur = this.gen.executor;
    const out: ExecutorStats = { running: 0, waiting: 0, usedTokens: 0, totalTokens: cur.contextSize * cur.sequences };
    for (const g of [this.gen, ...this.retiring]) {
      if (g.released) continue;
      const s = g.executor.stats();
      out.running += s.running;
      out.waiting += s.waiting;
      out.usedTokens += s.usedTokens;
      if (g === this.gen) out.totalTokens = s.totalTokens;
    }
    return out;
  }

  /**
   * The executors' counters (prefix cache, preemptions, speculative decoding) since the slot was made: those of
   * every executor it served, so that a weight switch or a sleep does not lose them (Prometheus counters, run
   * summaries). Only counters some executor has are present.
   */
  counters(): ExecutorCounters {
    const out: ExecutorCounters = {};
    addCounters(out, this.pastCounters);
    for (const g of [this.gen, ...this.retiring]) if (!g.released) addCounters(out, g.executor.stats());
    return out;
  }

  /** Keep the counters of `g`'s executor as it stops counting here (closed, or a retired version drained). */
  private settle(g: Generation): void {
    if (!g.released) addCounters(this.pastCounters, g.executor.stats());
  }

  /** Admit one request on the current version; 503 while sleeping or shut down. */
  acquire(): SlotLease {
    if (this.closed) throw new HttpError(503, "engine is shutting down", "server_error", null, "unavailable");
    if (this.sleeping) {
      throw new HttpError(503, "engine is sleeping (POST /wake_up to resume serving)", "server_error", null, "engine_sleeping");
    }
    const hold: RequestHold = { controller: new AbortController(), bySwitch: false, gen: this.gen, segment: null, resume: false };
    hold.gen.active.add(hold);
    let released = false;
    const resumable: ResumableHold = {
      get executor() {
        return hold.gen.executor;
      },
      get policyVersion() {
        return hold.gen.policyVersion;
      },
      beginSegment: () => {
        hold.segment = new AbortController();
        hold.resume = false;
        return hold.segment.signal;
      },
      endSegment: () => {
        hold.segment = null;
        return hold.resume;
      },
      moveToCurrent: () => {
        if (this.closed || released || this.gen.released) return false;
        moveHold(hold, this.gen);
        return true;
      },
    };
    const executor = new ResumingExecutor(resumable, this.stopIds);
    return {
      executor,
      get policyVersion() {
        return hold.gen.policyVersion;
      },
      signal: hold.controller.signal,
      get abortedBySwitch() {
        return hold.bySwitch;
      },
      abort: () => hold.controller.abort(),
      release: () => {
        if (released) return;
        released = true;
        removeHold(hold);
      },
      tokenPolicyVersions: (count) => executor.tokenPolicyVersions(count),
    };
  }

  /**
   * Load `modelPath` as `policyVersion` and switch to it: new requests go to it at once; requests
   * in flight finish on the old version (closed when the last one ends), are aborted, or stop
   * between steps and resume on the new version; those not generating yet simply move to it.
   * 400 when the version is not newer or the file cannot be loaded (the old version keeps serving).
   */
  loadWeights(modelPath: string, policyVersion: number, inFlight: InFlightPolicy): Promise<LoadWeightsResult> {
    return this.serial(async () => {
      this.checkOpen();
      if (this.sleeping) throw new HttpError(503, "engine is sleeping; POST /wake_up before loading weights", "server_error", null, "engine_sleeping");
      this.checkVersion(policyVersion);
      const executor = await this.loadChecked(modelPath, "model_path");
      // Re-checked after the await: close() may have run while the GGUF was loading.
      if (this.closed) {
        await executor.close();
        this.checkOpen();
      }
      const old = this.gen;
      this.gen = newGeneration(executor, policyVersion, modelPath, true);
      const running = old.active.size;
      if (inFlight === "abort") {
        for (const hold of old.active) {
          hold.bySwitch = true;
          hold.controller.abort();
        }
      } else if (inFlight === "resume") {
        for (const hold of [...old.active]) {
          if (hold.segment) {
            hold.resume = true;
            hold.segment.abort();
          } else {
            moveHold(hold, this.gen);
          }
        }
      }
      this.retire(old);
      return {
        policy_version: policyVersion,
        previous_policy_version: old.policyVersion,
        model_path: modelPath,
        in_flight: inFlight,
        in_flight_requests: running,
      };
    });
  }

  /**
   * Stop admitting at once, let running requests finish, then close the executor (releasing its
   * context memory and weights). A no-op when already sleeping.
   */
  sleep(level: 1 | 2): Promise<void> {
    // Already asleep (or going to sleep): answer once that sleep is complete.
    if (this.sleeping) return this.serial(async () => {});
    this.checkOpen();
    this.sleepLevel = level;
    return this.serial(async () => {
      const gen = this.gen;
      // Requests resuming from a retiring version join `gen` as they go: wait until all are done.
      do await Promise.all([whenDrained(gen), ...this.retired]);
      while (gen.active.size > 0 || this.retiring.size > 0);
      if (gen.owned && !gen.released && this.sleeping) {
        this.settle(gen);
        gen.released = true;
        await gen.executor.close();
      }
    });
  }

  /** Reload the executor closed by sleep and admit requests again; a no-op when awake. */
  wakeUp(): Promise<void> {
    return this.serial(async () => {
      this.checkOpen();
      if (!this.sleeping) return;
      const gen = this.gen;
      if (gen.released) {
        gen.executor = await this.loadChecked(gen.modelPath, null);
        gen.released = false;
      }
      this.sleepLevel = 0;
    });
  }

  /** The sleep level (0 = awake). */
  get level(): 0 | 1 | 2 {
    return this.sleepLevel;
  }

  /** Abort every request and close the executors the slot owns. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const gens = [this.gen, ...this.retiring];
    for (const g of gens) for (const hold of g.active) hold.controller.abort();
    await this.ops.catch(() => {});
    await Promise.all(
      gens.map(async (g) => {
        if (g.owned && !g.released) {
          g.released = true;
          await g.executor.close();
        }
      }),
    );
  }

  private retire(old: Generation): void {
    this.retiring.add(old);
    // The oldest versions beyond the bound: their requests end now (aborted by the switch), and they close once drained.
    let over = this.retiring.size - (this.opts.maxRetiringVersions ?? DEFAULT_MAX_RETIRING_VERSIONS);
    for (const g of this.retiring) {
      if (over-- <= 0) break;
      for (const hold of g.active) {
        hold.bySwitch = true;
        hold.controller.abort();
      }
    }
    const done = whenDrained(old).then(async () => {
      this.settle(old);
      this.retiring.delete(old);
      if (old.owned && !old.released) {
        old.released = true;
        await old.executor.close();
      }
    });
    this.retired.push(done);
    void done.finally(() => {
      const at = this.retired.indexOf(done);
      if (at >= 0) this.retired.splice(at, 1);
    });
  }

  private checkVersion(policyVersion: number): void {
    if (!(policyVersion > this.gen.policyVersion)) {
      throw invalidRequest(
        "policy_version",
        `must be greater than the current policy version ${this.gen.policyVersion} (got ${policyVersion})`,
        "stale_policy_version",
      );
    }
  }

  private async loadChecked(modelPath: string, param: string | null): Promise<Executor> {
    let executor: Executor;
    try {
      executor = await this.opts.load(modelPath);
    } catch (err) {
      throw loadError(param, modelPath, err);
    }
    try {
      this.opts.check?.(executor, modelPath);
    } catch (err) {
      await executor.close();
      throw loadError(param, modelPath, err);
    }
    return executor;
  }

  private checkOpen(): void {
    if (this.closed) throw new HttpError(503, "engine is shutting down", "server_error", null, "unavailable");
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.ops.then(fn, fn);
    this.ops = next.catch(() => {});
    return next;
  }
}

function newGeneration(executor: Executor, policyVersion: number, modelPath: string, owned: boolean): Generation {
  return { executor, policyVersion, modelPath, owned, released: false, active: new Set() };
}

/** Join `to` before leaving the old generation, so that no drain is seen in between. */
function moveHold(hold: RequestHold, to: Generation): void {
  if (hold.gen === to) return;
  to.active.add(hold);
  removeHold(hold);
  hold.gen = to;
}

function removeHold(hold: RequestHold): void {
  const gen = hold.gen;
  if (!gen.active.delete(hold)) return;
  if (gen.active.size === 0) gen.drained?.();
}

function whenDrained(gen: Generation): Promise<void> {
  if (gen.active.size === 0) return Promise.resolve();
  return new Promise((resolve) => {
    const prev = gen.drained;
    gen.drained = () => {
      prev?.();
      resolve();
    };
  });
}

function loadError(param: string | null, modelPath: string, err: unknown): HttpError {
  const msg = (err as Error).message ?? String(err);
  const text = msg.includes(modelPath) ? msg : `cannot load ${modelPath}: ${msg}`;
  // A path the client named is a client error; a failed reload of the serving path is ours.
  return param ? invalidRequest(param, text, "model_load_failed") : new HttpError(500, text, "server_error", null, "model_load_failed");
}
