// The routing pipeline: filters → weighted scorers → pick (max total; ties round-robin), plus the
// state the plugins read — per-backend loads, program bindings, approximate prefix trees — kept
// current by the gateway's outcome reports. I/O-free and deterministic, so the simulator runs it.
import { ArborError, CapacityError } from "../../core/errors.js";
import { ApproxRadixTree } from "./radix-tree.js";
import {
  promptLengthOf,
  type BackendView,
  type RoutingFilter,
  type RoutingRequest,
  type RoutingScorer,
  type ScoreContext,
} from "./types.js";

export interface WeightedScorer {
  scorer: RoutingScorer;
  /** Positive weight of this scorer in the sum. */
  weight: number;
}

export interface PluginRouterOptions {
  backends: readonly string[];
  filters: readonly RoutingFilter[];
  scorers: readonly WeightedScorer[];
  /** Bound on each backend's approximate prefix tree, in tokens. Default 2^20. */
  prefixTreeMaxTokens?: number;
  /** Program → backend bindings remembered; the least recently routed is forgotten first. Default 100000. */
  maxPrograms?: number;
  /** Calls in flight at most; one more is a CapacityError. Default 100000. */
  maxInFlight?: number;
}

/** Where a call went, and why; `id` identifies it in {@link PluginRouter.onFinished}. */
export interface RouteDecision {
  id: number;
  backend: string;
  programId: string;
  /** Weighted total per candidate that survived the filters, in backend order. */
  totals: { backend: string; total: number }[];
}

/** What the gateway reports when a call ends. */
export interface FinishedCall {
  /** The prompt's token ids, if learnt only now (e.g. from the engine's response). */
  promptTokens?: readonly number[];
  /** Output token ids (inserted into the prefix tree) or just their count. */
  outputTokens: readonly number[] | number;
  /** False when the call failed: nothing new is assumed cached. Default true. */
  ok?: boolean;
}

/** Engine metrics the scraper reports; fields left out keep their previous value. */
export interface BackendMetrics {
  running?: number;
  waiting?: number;
  kvUsage?: number;
  kvCapacityTokens?: number;
  blockSize?: number;
}

interface BackendState {
  name: string;
  healthy: boolean;
  inFlight: number;
  queued: number;
  metrics: BackendMetrics;
  programs: number;
  activeTokens: number;
  activePrefillTokens: number;
  tree: ApproxRadixTree;
}

interface Flight {
  backend: BackendState;
  programId: string;
  promptTokens: readonly number[] | undefined;
  activeTokens: number;
  /** Uncached prompt tokens still to prefill (0 once prefill is done). */
  prefillTokens: number;
}

const TIE_EPSILON = 1e-9;

/** Filter → score → pick over a fixed set of named backends. */
export class PluginRouter {
  private readonly states: BackendState[] = [];
  private readonly byName = new Map<string, BackendState>();
  // Map order is recency order: re-set on every route, so the first key is the stalest binding.
  private readonly bindings = new Map<string, BackendState>();
  private readonly flights = new Map<number, Flight>();
  private readonly filters: readonly RoutingFilter[];
  private readonly scorers: readonly WeightedScorer[];
  private readonly maxPrograms: number;
  private readonly maxInFlight: number;
  private nextId = 1;
  // Index (in backend order) from which the next tie is resolved.
  private cursor = 0;

  constructor(opts: PluginRouterOptions) {
    if (opts.backends.length === 0) throw new ArborError("gateway.routing: needs at least one backend", "config");
    const treeMax = positiveInt(opts.prefixTreeMaxTokens ?? 1 << 20, "prefixTreeMaxTokens");
    this.maxPrograms = positiveInt(opts.maxPrograms ?? 100_000, "maxPrograms");
    this.maxInFlight = positiveInt(opts.maxInFlight ?? 100_000, "maxInFlight");
    for (const name of opts.backends) {
      if (this.byName.has(name)) throw new ArborError(`gateway.routing: backend name '${name}' is used twice`, "config");
      const s: BackendState = {
        name,
        healthy: true,
        inFlight: 0,
        queued: 0,
        metrics: {},
        programs: 0,
        activeTokens: 0,
        activePrefillTokens: 0,
        tree: new ApproxRadixTree(treeMax),
      };
      this.states.push(s);
      this.byName.set(name, s);
    }
    if (opts.scorers.length === 0) throw new ArborError("gateway.routing.scorers: needs at least one scorer", "config");
    for (const { scorer, weight } of opts.scorers) {
      if (!(Number.isFinite(weight) && weight > 0)) {
        throw new ArborError(`gateway.routing.scorers[${scorer.name}].weight: must be a finite number > 0, got ${weight}`, "config");
      }
    }
    this.filters = [...opts.filters];
    this.scorers = [...opts.scorers];
  }

  /** Choose a backend for one call and account for it until {@link PluginRouter.onFinished}. */
  route(req: RoutingRequest): RouteDecision {
    checkRequest(req);
    if (this.flights.size >= this.maxInFlight) throw new CapacityError("router in-flight table", this.maxInFlight);
    let candidates = req.only === undefined ? this.views() : this.views().filter((v) => v.name === req.only);
    for (const f of this.filters) {
      const kept = f.filter(req, candidates);
      if (kept.some((k) => !candidates.includes(k))) {
        throw new ArborError(`routing filter '${f.name}' returned a backend that was not a candidate`, "routing");
      }
      if (kept.length === 0) {
        throw new ArborError(
          `routing: filter '${f.name}' left no backend for program '${req.programId}' (candidates: ${candidates.map((c) => c.name).join(", ") || "none"})`,
          "no_backend",
        );
      }
      candidates = kept;
    }

    const ctx = this.context(req, candidates);
    const totals = candidates.map(() => 0);
    for (const { scorer, weight } of this.scorers) {
      const s = scorer.score(ctx);
      if (s.length !== candidates.length) {
        throw new ArborError(`routing scorer '${scorer.name}' returned ${s.length} scores for ${candidates.length} backends`, "routing");
      }
      s.forEach((v, i) => {
        if (!(v >= 0 && v <= 1)) throw new ArborError(`routing scorer '${scorer.name}' returned score ${v} outside [0, 1]`, "routing");
        totals[i] = (totals[i] as number) + weight * v;
      });
    }

    const chosen = this.pick(candidates, totals);
    const state = this.byName.get(chosen.name) as BackendState;
    const matched = req.promptTokens === undefined ? 0 : state.tree.match(req.promptTokens);
    const length = ctx.promptLength;
    const flight: Flight = {
      backend: state,
      programId: req.programId,
      promptTokens: req.promptTokens,
      activeTokens: length,
      prefillTokens: Math.max(0, length - matched),
    };
    const id = this.nextId++;
    this.flights.set(id, flight);
    state.inFlight++;
    state.activeTokens += flight.activeTokens;
    state.activePrefillTokens += flight.prefillTokens;
    if (req.promptTokens !== undefined) state.tree.insert(req.promptTokens);
    this.bind(req.programId, state);
    return {
      id,
      backend: state.name,
      programId: req.programId,
      totals: candidates.map((c, i) => ({ backend: c.name, total: totals[i] as number })),
    };
  }

  /** The call's first token arrived: its prompt no longer loads the backend's prefill. */
  onPrefillDone(id: number): void {
    const f = this.flight(id);
    f.backend.activePrefillTokens -= f.prefillTokens;
    f.prefillTokens = 0;
  }

  /** The call ended; a successful one leaves prompt + output cached on its backend. */
  onFinished(id: number, result: FinishedCall): void {
    const f = this.flight(id);
    this.flights.delete(id);
    const s = f.backend;
    s.inFlight--;
    s.activeTokens -= f.activeTokens;
    s.activePrefillTokens -= f.prefillTokens;
    const prompt = result.promptTokens ?? f.promptTokens;
    if (result.ok !== false && prompt !== undefined && typeof result.outputTokens !== "number") {
      s.tree.insert(prompt, result.outputTokens);
    }
  }

  /** The program ended: forget its binding. */
  releaseProgram(programId: string): void {
    const s = this.bindings.get(programId);
    if (s === undefined) return;
    this.bindings.delete(programId);
    s.programs--;
  }

  /** Take a backend out of (or back into) rotation. Going down clears its prefix tree: its cache is lost. */
  setHealthy(name: string, healthy: boolean): void {
    const s = this.backend(name);
    if (s.healthy && !healthy) s.tree.clear();
    s.healthy = healthy;
  }

  /** Calls the gateway holds for `name` but has not sent. */
  setQueued(name: string, queued: number): void {
    const s = this.backend(name);
    if (!(Number.isInteger(queued) && queued >= 0)) {
      throw new ArborError(`routing: queued for '${name}': must be an integer >= 0, got ${queued}`, "routing");
    }
    s.queued = queued;
  }

  /** Record freshly scraped engine metrics for `name`. */
  updateMetrics(name: string, m: BackendMetrics): void {
    const s = this.backend(name);
    const check = (field: keyof BackendMetrics, ok: (v: number) => boolean, rule: string): void => {
      const v = m[field];
      if (v !== undefined && !ok(v)) {
        throw new ArborError(`routing metrics for '${name}': ${field} ${rule}, got ${v}`, "routing");
      }
    };
    const count = (v: number): boolean => Number.isInteger(v) && v >= 0;
    check("running", count, "must be an integer >= 0");
    check("waiting", count, "must be an integer >= 0");
    check("kvUsage", (v) => v >= 0 && v <= 1, "must be within 0..1");
    check("kvCapacityTokens", (v) => Number.isInteger(v) && v >= 1, "must be an integer >= 1");
    check("blockSize", (v) => Number.isInteger(v) && v >= 1, "must be an integer >= 1");
    s.metrics = { ...s.metrics, ...stripUndefined(m) };
  }

  /** Snapshot of every backend, in configured order. */
  views(): BackendView[] {
    return this.states.map((s) => ({
      name: s.name,
      healthy: s.healthy,
      inFlight: s.inFlight,
      queued: s.queued,
      ...s.metrics,
      programs: s.programs,
      activeTokens: s.activeTokens,
      activePrefillTokens: s.activePrefillTokens,
      treeTokens: s.tree.tokens,
    }));
  }

  /** Backend of the program's latest call, if still bound. */
  boundBackend(programId: string): string | undefined {
    return this.bindings.get(programId)?.name;
  }

  private context(req: RoutingRequest, backends: readonly BackendView[]): ScoreContext {
    let matched: number[] | undefined;
    const tokens = req.promptTokens;
    return {
      request: req,
      backends,
      boundBackend: this.bindings.get(req.programId)?.name,
      promptLength: promptLengthOf(req),
      prefixMatch: () => {
        matched ??= backends.map((b) => (tokens === undefined ? 0 : (this.byName.get(b.name) as BackendState).tree.match(tokens)));
        return matched;
      },
    };
  }

  private pick(candidates: readonly BackendView[], totals: readonly number[]): BackendView {
    const best = Math.max(...totals);
    const n = this.states.length;
    let chosen: BackendView | undefined;
    let chosenDist = Infinity;
    candidates.forEach((c, i) => {
      if ((totals[i] as number) < best - TIE_EPSILON) return;
      const idx = this.states.indexOf(this.byName.get(c.name) as BackendState);
      const dist = (idx - this.cursor + n) % n;
      if (dist < chosenDist) {
        chosen = c;
        chosenDist = dist;
      }
    });
    const c = chosen as BackendView;
    this.cursor = (this.states.indexOf(this.byName.get(c.name) as BackendState) + 1) % n;
    return c;
  }

  private bind(programId: string, s: BackendState): void {
    const old = this.bindings.get(programId);
    if (old !== undefined) {
      this.bindings.delete(programId);
      old.programs--;
    }
    this.bindings.set(programId, s);
    s.programs++;
    if (this.bindings.size > this.maxPrograms) {
      const [stalest, st] = this.bindings.entries().next().value as [string, BackendState];
      this.bindings.delete(stalest);
      st.programs--;
    }
  }

  private flight(id: number): Flight {
    const f = this.flights.get(id);
    if (f === undefined) throw new ArborError(`routing: no call in flight with id ${id}`, "routing");
    return f;
  }

  private backend(name: string): BackendState {
    const s = this.byName.get(name);
    if (s === undefined) {
      throw new ArborError(`routing: unknown backend '${name}' (known: ${this.states.map((x) => x.name).join(", ")})`, "routing");
    }
    return s;
  }
}

function checkRequest(req: RoutingRequest): void {
  if (typeof req.programId !== "string" || req.programId.length === 0) {
    throw new ArborError("routing request: programId must be a non-empty string", "routing");
  }
  const est = req.estimatedPromptTokens;
  if (est !== undefined && !(Number.isInteger(est) && est >= 0)) {
    throw new ArborError(`routing request: estimatedPromptTokens must be an integer >= 0, got ${est}`, "routing");
  }
}

function positiveInt(v: number, field: string): number {
  if (!(Number.isInteger(v) && v >= 1)) throw new ArborError(`gateway.routing.${field}: must be an integer >= 1, got ${v}`, "config");
  return v;
}

function stripUndefined(m: BackendMetrics): BackendMetrics {
  return Object.fromEntries(Object.entries(m).filter(([, v]) => v !== undefined)) as BackendMetrics;
}
