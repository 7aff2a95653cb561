// Runs divided rollouts (Seer §B5) over token-level backends: each chunk the ChunkPlanner asks for
// goes to the backend with the most free KV at that moment (fresh scrape of every backend), as
// prompt ‖ tokens so far with the request's own seed and sampling, and the chunks' outputs,
// logprobs and policy versions come back as one result. With the built-in engine, whose seeded
// draws are keyed by sequence position, a chunked generation reproduces the unchunked one.
// KV follows a generation that changes backend (Seer's global KV pool): where the previous chunk's
// engine can share a program's KV (TokenBackend.shareProgram: the KV pool as its L3), its context is
// moved there and the next engine loads it instead of prefilling prompt ‖ tokens so far again. Each
// generation runs under a program id for that (the call's own, else one of its own).
import { randomUUID } from "node:crypto";
import type { RunConfig } from "../../core/config.js";
import { ArborError } from "../../core/errors.js";
import { BackendUnreachableError, type GenerateRequest, type TokenBackend } from "../../backends/backend.js";
import { canMoveProgramKv, moveProgramKv, type KvOrigin, type KvTarget } from "../../backends/program-kv-move.js";
import { ChunkPlanner, type DividedResult } from "./chunk-planner.js";
import { rankByFreeKv, type CandidateScore, type PlacementCandidate } from "./placement.js";

/** Default bound on the chunks of one generation (the config may lower or raise it). */
export const DEFAULT_MAX_CHUNKS = 4096;

export interface DividedRolloutOptions {
  /** Backends chunks may go to; those without token-level generation are not used. */
  backends: readonly TokenBackend[];
  /** Tokens asked of one chunk at most (config `gateway.dividedRollout.chunkTokens`). */
  chunkTokens: number;
  /** Chunks one generation may take (default {@link DEFAULT_MAX_CHUNKS}). */
  maxChunks?: number;
  /** Told of each placement as it is decided (logging, tests); must not throw. */
  onPlacement?: (p: Placement) => void;
}

/**
 * The divided rollout the config asks for (`gateway.dividedRollout`), over the gateway's backends;
 * null when the option is absent (calls then go to one backend whole).
 */
export function dividedRolloutFromConfig(
  cfg: RunConfig["gateway"]["dividedRollout"],
  backends: readonly TokenBackend[],
  onPlacement?: (p: Placement) => void,
): DividedRollout | null {
  if (!cfg) return null;
  return new DividedRollout({
    backends,
    chunkTokens: cfg.chunkTokens,
    ...(cfg.maxChunks !== undefined ? { maxChunks: cfg.maxChunks } : {}),
    ...(onPlacement ? { onPlacement } : {}),
  });
}

/** One placement decision: which backend got chunk `chunk`, and every candidate's score then. */
export interface Placement {
  chunk: number;
  backend: string;
  /** 0 for the first choice; n when the n better-ranked backends could not be reached. */
  attempt: number;
  scores: CandidateScore[];
  /**
   * Set when the chunk runs on another backend than the previous chunk: whether the context's KV
   * was moved there (`moved`, with the tokens the new engine can load), or why not.
   */
  kv?: { moved: true; tokens: number } | { moved: false; reason: string };
}

/** Places and stitches divided generations; see the file header. */
export class DividedRollout {
  private readonly backends: readonly TokenBackend[];
  private readonly chunkTokens: number;
  private readonly maxChunks: number;
  private readonly onPlacement: DividedRolloutOptions["onPlacement"];

  constructor(opts: DividedRolloutOptions) {
    this.backends = opts.backends.filter((b) => b.capabilities.tokenIds);
    if (this.backends.length === 0) {
      throw new ArborError("divided rollout: backends: none has token-level generation (capabilities.tokenIds)", "config");
    }
    const names = new Set<string>();
    for (const b of this.backends) {
      if (names.has(b.name)) throw new ArborError(`divided rollout: backends: the name '${b.name}' is used twice`, "config");
      names.add(b.name);
    }
    for (const [field, v] of [["chunkTokens", opts.chunkTokens], ["maxChunks", opts.maxChunks ?? DEFAULT_MAX_CHUNKS]] as const) {
      if (!Number.isInteger(v) || v < 1) throw new ArborError(`divided rollout: ${field} must be an integer >= 1, got ${v}`, "config");
    }
    this.chunkTokens = opts.chunkTokens;
    this.maxChunks = opts.maxChunks ?? DEFAULT_MAX_CHUNKS;
    this.onPlacement = opts.onPlacement;
  }

  /** Start a generation to drive chunk by chunk (see {@link generate} for the whole run). */
  begin(req: GenerateRequest): DividedGeneration {
    const planner = new ChunkPlanner({
      promptTokenIds: req.promptTokenIds,
      maxTokens: req.maxTokens,
      chunkTokens: this.chunkTokens,
      maxChunks: this.maxChunks,
      ...(req.stopTokenIds ? { stopTokenIds: req.stopTokenIds } : {}),
    });
    return new DividedGeneration(this.backends, planner, req, this.onPlacement);
  }

  /**
   * Generate in chunks until a stop token, the budget or an abort. Throws `signal.reason` when
   * aborted before any token, ArborError "backend_unavailable" when no backend can take a chunk,
   * and a backend's own error (HTTP, protocol) as the adapter raised it.
   */
  async generate(req: GenerateRequest): Promise<DividedResult> {
    const g = this.begin(req);
    while (await g.step()) {
      // one chunk per step
    }
    return g.result();
  }
}

/** One divided generation in progress. */
export class DividedGeneration {
  /** Every placement so far, in order. */
  readonly placements: Placement[] = [];
  private stepping = false;
  /** The backend of the last chunk that ran, whose engine holds the context's KV. */
  private holder: TokenBackend | undefined;
  private readonly programId: string;

  private readonly backends: readonly TokenBackend[];

  constructor(
    backends: readonly TokenBackend[],
    private readonly planner: ChunkPlanner,
    private readonly req: GenerateRequest,
    private readonly onPlacement: DividedRolloutOptions["onPlacement"],
  ) {
    // Chunks go only to backends that carry the call's sampling controls (token-call.ts checked the
    // routed one): a chunk elsewhere would silently drop them.
    const needed = (["logitBias", "repetitionPenalty", "minTokens", "ignoreEos"] as const).filter((k) => req[k] !== undefined);
    this.backends = backends.filter((b) => needed.every((k) => b.samplingControls?.includes(k)));
    if (this.backends.length === 0) throw new ArborError(`divided rollout: no backend carries ${needed.join(", ")}`, "invalid_request");
    this.programId = req.programId ?? `divided-${randomUUID()}`;
  }

  /** Whether the generation has ended. */
  get done(): boolean {
    return this.planner.done;
  }

  /** Run the next chunk; false when the generation had already ended. One step at a time. */
  async step(): Promise<boolean> {
    if (this.stepping) throw new ArborError("divided rollout: step() called while a chunk is running", "engine");
    this.stepping = true;
    try {
      return await this.runChunk();
    } finally {
      this.stepping = false;
    }
  }

  /** The generation as stitched so far (finishReason "abort" while not done). */
  result(): DividedResult {
    return this.planner.result();
  }

  private async runChunk(): Promise<boolean> {
    const signal = this.req.signal;
    if (this.planner.done) return false;
    if (signal?.aborted) return this.aborted();
    const chunk = this.planner.next();
    if (!chunk) return false;

    const candidates = await this.scrape();
    const { ranked, scores } = rankByFreeKv(candidates);
    for (let attempt = 0; attempt < ranked.length; attempt++) {
      const name = ranked[attempt] as string;
      const backend = this.backends.find((b) => b.name === name) as TokenBackend;
      const placement: Placement = { chunk: chunk.index, backend: name, attempt, scores: scores.map((s) => ({ ...s })) };
      if (this.holder && this.holder !== backend) placement.kv = await this.moveKv(this.holder, backend);
      this.placements.push(placement);
      try {
        this.onPlacement?.(placement);
      } catch {
        // An observer must not break the rollout.
      }
      try {
        const r = await backend.generate({
          promptTokenIds: chunk.promptTokenIds,
          maxTokens: chunk.maxTokens,
          temperature: this.req.temperature,
          ...(this.req.topP !== undefined ? { topP: this.req.topP } : {}),
          ...(this.req.seed !== undefined ? { seed: this.req.seed } : {}),
          ...(this.req.stopTokenIds ? { stopTokenIds: this.req.stopTokenIds } : {}),
          ...(this.req.logitBias ? { logitBias: this.req.logitBias } : {}),
          // The continuation's prompt holds the earlier chunks' tokens, so the penalty covers them.
          ...(this.req.repetitionPenalty !== undefined ? { repetitionPenalty: this.req.repetitionPenalty } : {}),
          ...(this.req.ignoreEos ? { ignoreEos: true } : {}),
          // min_tokens counts the whole generation: what the earlier chunks produced is subtracted.
          ...chunkMinTokens(this.req.minTokens, this.planner.generated, chunk.maxTokens),
          programId: this.programId,
          ...(signal ? { signal } : {}),
        });
        this.planner.record(name, r);
        this.holder = backend;
        return true;
      } catch (err) {
        if (signal?.aborted) return this.aborted();
        if (!(err instanceof BackendUnreachableError)) {
          this.planner.abort();
          throw err;
        }
        // Gone since its scrape: the chunk tries the next-best backend.
        const s = scores.find((x) => x.name === name) as CandidateScore;
        s.unavailable = `generate failed: ${err.message}`;
      }
    }
    this.planner.abort();
    const why = scores.map((s) => `${s.name}: ${s.unavailable ?? "not tried"}`).join("; ");
    throw new ArborError(`divided rollout: no backend available for chunk ${chunk.index} (${why || "no backends"})`, "backend_unavailable");
  }

  /**
   * Move the context's KV from the engine of the last chunk to the next one's through the tier they
   * share: `from` saves it there (which pauses the program on it, lifted at once), `to` learns of
   * it. Never throws: a failed move costs the next engine a prefill, as without a pool.
   */
  private async moveKv(from: TokenBackend, to: TokenBackend): Promise<NonNullable<Placement["kv"]>> {
    if (!canMoveProgramKv(from, to)) return { moved: false, reason: `backend '${from.name}' or '${to.name}' cannot move a program's KV` };
    const id = this.programId;
    try {
      const tokens = await moveProgramKv(from as KvOrigin, to as KvTarget, id);
      return tokens > 0 ? { moved: true, tokens } : { moved: false, reason: `backend '${to.name}' found no KV of the program in the tier it shares with '${from.name}'` };
    } catch (err) {
      return { moved: false, reason: `moving the KV from '${from.name}' to '${to.name}' failed: ${(err as Error).message}` };
    } finally {
      // Sharing paused the program on `from`: lift it, whether or not the move worked.
      await (from as KvOrigin).restore(id).catch(() => undefined);
    }
  }

  /** Aborted: end with the tokens so far, or throw the abort reason when there are none. */
  private aborted(): boolean {
    this.planner.abort();
    if (this.planner.generated === 0) throw this.req.signal?.reason ?? new ArborError("divided rollout: aborted", "aborted");
    return false;
  }

  private async scrape(): Promise<PlacementCandidate[]> {
    const settled = await Promise.allSettled(this.backends.map((b) => b.scrapeMetrics()));
    return settled.map((s, i) => {
      const name = (this.backends[i] as TokenBackend).name;
      return s.status === "fulfilled" ? { name, metrics: s.value } : { name, metrics: null, error: `metrics: ${(s.reason as Error)?.message ?? String(s.reason)}` };
    });
  }
}

/** A chunk's share of min_tokens: what is left of it after `generated` tokens, within the chunk's budget. */
function chunkMinTokens(minTokens: number | undefined, generated: number, chunkMax: number): { minTokens?: number } {
  const left = Math.min(chunkMax, (minTokens ?? 0) - generated);
  return left > 0 ? { minTokens: left } : {};
}
