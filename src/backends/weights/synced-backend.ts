// A backend whose engine Arbor switches to new policy weights (an external vLLM, SGLang or managed
// llama-server): the one place where, for every engine kind, calls are held back during a switch, in-flight
// calls are drained (or aborted or resumed, as the engine allows), and each call is recorded with the policy
// version that actually served it. The engine-specific part is an EngineWeightLoader (engine-weights.ts).
//
// A switch: close the gate (new calls wait) → loader.prepare(mode) → wait for in-flight calls to end (always,
// bounded: an aborted call ends at once, a held one is not counted) → loader.load → open the gate. A switch
// that fails leaves the backend *retired*: every call and health check fails naming the reason, so the gateway
// keeps it out of rotation for good (a health check would otherwise bring back an engine that serves stale
// weights).
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { BackendUnreachableError, type GenerateRequest, type GenerateResult, type GenerateStream, type TokenBackend, type TokenDelta } from "../backend.js";
import type { EngineWeightLoader, InFlightOnSwitch, WeightsFormat } from "./engine-weights.js";

/** Options of {@link SyncedBackend}. */
export interface SyncedBackendOptions {
  /** Makes the adapter; called again with the new model name when a load changes it (a LoRA adapter per version). */
  makeBackend: (model?: string) => TokenBackend;
  loader: EngineWeightLoader;
  /** What in-flight calls do at a switch (config `inFlightOnWeightSwitch`), where the engine allows it. */
  inFlight: InFlightOnSwitch;
  /** Version the engine serves at the start (0: the run's initial weights). */
  version?: number;
  /** Longest wait for in-flight calls to end before a switch fails (default 10 minutes). */
  drainTimeoutMs?: number;
  clock: Clock;
  /** Told each switch's outcome (the run's log). */
  log?: (line: string) => void;
  /** Told once when a failed switch retires the backend (the gateway takes it out of rotation at once). */
  onRetired?: (reason: string) => void;
}

/** What one switch did. */
export interface SwitchOutcome {
  backend: string;
  version: number;
  /** The in-flight mode applied (the configured one, or the engine's fallback). */
  mode: InFlightOnSwitch;
  /** Calls in flight when the switch began. */
  inFlight: number;
  ms: number;
}

/** A call in flight: the version it was sent under and whether a resuming switch happened during it. */
interface Flight {
  version: number;
  spanned: boolean;
}

/**
 * Wraps an engine's backend so that weight switches are safe for the calls going through it. `backend` is
 * what the gateway routes to; `switchTo` is what the run's weight sync calls.
 */
export class SyncedBackend {
  private inner: TokenBackend;
  private current: number;
  private gate: Promise<void> | undefined;
  private retiredBecause: string | undefined;
  private readonly flights = new Set<Flight>();
  private drained: (() => void) | undefined;
  readonly backend: TokenBackend;

  constructor(private readonly o: SyncedBackendOptions) {
    this.inner = o.makeBackend();
    this.current = o.version ?? 0;
    this.backend = this.wrap();
  }

  get name(): string {
    return this.inner.name;
  }

  /** The policy version the engine serves (the last one loaded and confirmed). */
  get version(): number {
    return this.current;
  }

  /** Why the backend is out of rotation for good (undefined while it serves). */
  get retired(): string | undefined {
    return this.retiredBecause;
  }

  /** The checkpoint format the engine loads. */
  get format(): WeightsFormat {
    return this.o.loader.format;
  }

  /**
   * Have the engine serve `version` from `path` (in the loader's format). Resolves once it does; rejects with
   * an ArborError (code "weight_sync") naming the backend, after which the backend is retired.
   */
  async switchTo(path: string, version: number): Promise<SwitchOutcome> {
    if (this.retiredBecause !== undefined) throw new ArborError(`weight sync: backend ${this.name} is out of rotation: ${this.retiredBecause}`, "weight_sync");
    if (version === this.current) return { backend: this.name, version, mode: this.o.inFlight, inFlight: 0, ms: 0 };
    if (this.gate !== undefined) throw new ArborError(`weight sync: backend ${this.name} is already switching weights`, "weight_sync");
    const start = this.o.clock.now();
    let open!: () => void;
    this.gate = new Promise<void>((resolve) => (open = resolve));
    const inFlight = this.flights.size;
    try {
      const mode = await this.o.loader.prepare(this.o.inFlight);
      if (mode === "resume") for (const f of this.flights) f.spanned = true;
      else await this.drain(version);
      try {
        await this.o.loader.load(path, version);
      } catch (e) {
        await this.o.loader.recover?.();
        throw e;
      }
      const model = this.o.loader.modelName?.();
      if (model !== undefined && model !== this.inner.servedModel) this.inner = this.o.makeBackend(model);
      this.current = version;
      const outcome = { backend: this.name, version, mode, inFlight, ms: this.o.clock.now() - start };
      this.o.log?.(`weights  ${this.name}: serving policy version ${version} (${this.o.loader.kind}, in-flight ${mode}, ${inFlight} call(s) in flight, ${outcome.ms} ms)`);
      return outcome;
    } catch (e) {
      const why = e instanceof ArborError && e.code === "weight_sync" ? e.message : `weight sync: backend ${this.name} failed to load version ${version}: ${(e as Error).message}`;
      this.retiredBecause = why;
      this.o.onRetired?.(why);
      throw new ArborError(why, "weight_sync");
    } finally {
      this.gate = undefined;
      open();
    }
  }

  /** Release the loader (a managed engine process). */
  async close(): Promise<void> {
    await this.o.loader.close?.();
  }

  /** Wait until no call is in flight, bounded by drainTimeoutMs. */
  private drain(version: number): Promise<void> {
    if (this.flights.size === 0) return Promise.resolve();
    const limit = this.o.drainTimeoutMs ?? 600_000;
    return new Promise<void>((resolve, reject) => {
      const timer = this.o.clock.setTimer(limit, () => {
        this.drained = undefined;
        reject(new ArborError(`weight sync: backend ${this.name} still has ${this.flights.size} call(s) in flight after ${limit} ms; version ${version} not loaded`, "weight_sync"));
      });
      this.drained = () => {
        timer.cancel();
        this.drained = undefined;
        resolve();
      };
    });
  }

  /** Wait for a switch in progress, then register a call; throws when the backend is retired. */
  private async enter(): Promise<Flight> {
    while (this.gate !== undefined) await this.gate;
    if (this.retiredBecause !== undefined) throw new BackendUnreachableError(this.name, this.inner.url, `out of rotation: ${this.retiredBecause}`);
    const f = { version: this.current, spanned: false };
    this.flights.add(f);
    return f;
  }

  private leave(f: Flight): void {
    this.flights.delete(f);
    if (this.flights.size === 0) this.drained?.();
  }

  /** The version that served a call: the engine's own report, else the version it was sent under. */
  private stamp(f: Flight, r: GenerateResult): GenerateResult {
    if (r.policyVersion !== null) return r;
    // A call a resuming switch continued on new weights: which tokens came from which version is unknown.
    if (f.spanned) return { ...r, policyVersion: f.version, tokenPolicyVersions: r.outputTokenIds.map(() => null) };
    return { ...r, policyVersion: f.version };
  }

  private async guarded<T>(fn: (b: TokenBackend) => Promise<T>): Promise<T> {
    const f = await this.enter();
    try {
      return await fn(this.inner);
    } finally {
      this.leave(f);
    }
  }

  private async stream(req: GenerateRequest): Promise<GenerateStream> {
    const f = await this.enter();
    let s: GenerateStream;
    try {
      const start = this.inner.generateStream;
      if (!start) throw new ArborError(`backend ${this.name} cannot stream token ids`, "backend_capability");
      s = await start.call(this.inner, req);
    } catch (e) {
      this.leave(f);
      throw e;
    }
    // Deltas of a held call arrive after the switch: the version is read as each arrives, so a streamed call
    // that a resuming switch continued knows the version of every token.
    const versions: number[] = [];
    const result = (): GenerateResult => {
      const r = s.result();
      if (r.policyVersion !== null || !f.spanned || versions.length !== r.outputTokenIds.length) return this.stamp(f, r);
      return { ...r, policyVersion: f.version, tokenPolicyVersions: versions };
    };
    return { deltas: this.relay(s, f, versions), result };
  }

  /** The stream's deltas stamped with the version of each (noting it per token), leaving the flight at the end. */
  private async *relay(s: GenerateStream, f: Flight, versions: number[]): AsyncGenerator<TokenDelta> {
    try {
      for await (const d of s.deltas) {
        const v = d.policyVersion ?? (f.spanned ? this.current : f.version);
        for (let k = 0; k < d.ids.length; k++) versions.push(v);
        yield d.policyVersion !== null ? d : { ...d, policyVersion: v };
      }
    } finally {
      this.leave(f);
    }
  }

  private wrap(): TokenBackend {
    // Getters: the adapter can be remade (a new model name), and the gateway keeps this one object.
    const inner = (): TokenBackend => this.inner;
    const b: TokenBackend = {
      get name() {
        return inner().name;
      },
      get url() {
        return inner().url;
      },
      get servedModel() {
        return inner().servedModel;
      },
      get type() {
        return inner().type;
      },
      get capabilities() {
        return inner().capabilities;
      },
      get toolParser() {
        return inner().toolParser;
      },
      get reasoningParser() {
        return inner().reasoningParser;
      },
      get samplingControls() {
        return inner().samplingControls;
      },
      chatCompletions: (body, signal) => this.guarded((i) => i.chatCompletions(body, signal)),
      completions: (body, signal) => this.guarded((i) => i.completions(body, signal)),
      models: () => this.inner.models(),
      health: async () => {
        if (this.retiredBecause !== undefined) throw new BackendUnreachableError(this.name, this.inner.url, `out of rotation: ${this.retiredBecause}`);
        // Switching weights is a planned pause (a managed llama-server restarts): calls wait for it, so the backend
        // stays in rotation; a probe of the restarting engine would take it out, and the programs that start
        // meanwhile would all go to the other backends. A switch that fails retires it.
        if (this.gate !== undefined) return;
        await this.inner.health();
      },
      generate: async (req) => {
        const f = await this.enter();
        try {
          return this.stamp(f, await this.inner.generate(req));
        } finally {
          this.leave(f);
        }
      },
      scrapeMetrics: () => this.inner.scrapeMetrics(),
    };
    // Optional methods exist exactly when the adapter has them (the gateway checks for them).
    const i = this.inner;
    if (i.generateStream) b.generateStream = (req) => this.stream(req);
    if (i.tokenize) b.tokenize = (req) => this.inner.tokenize!(req);
    if (i.detokenize) b.detokenize = (ids, signal) => this.inner.detokenize!(ids, signal);
    if (i.pause) b.pause = (id) => this.inner.pause!(id);
    if (i.restore) b.restore = (id) => this.inner.restore!(id);
    return b;
  }
}
