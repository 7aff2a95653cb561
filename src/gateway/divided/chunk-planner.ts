// Seer's divided rollout (TECHNIQUES §B5) as an I/O-free state machine: a long generation is
// issued in chunks of `max_tokens = min(chunk, max_tokens − generated)`, each continuing from
// prompt ‖ tokens so far, until a chunk stops (stop token, abort, the engine's own length limit) or
// the budget is spent. The runner (divided-rollout.ts) places each chunk on a backend; this module
// only decides what the next chunk asks for and stitches the answers into one result, by the rules
// of divided-plan.ts that the rollout scheduling policies use too.
import { ArborError } from "../../core/errors.js";
import type { GenerateResult } from "../../backends/backend.js";
import { chunksNeeded, generationEnded, nextChunkTokens } from "./divided-plan.js";

export interface ChunkPlannerOptions {
  /** The caller's prompt, sent as-is (BOS and chat markers already in place). */
  promptTokenIds: readonly number[];
  /** Budget of the whole generation, stop token included. */
  maxTokens: number;
  /** Tokens asked of one chunk at most. */
  chunkTokens: number;
  /** Chunks one generation may take; a budget needing more is refused up front. */
  maxChunks: number;
  /** Tokens that end the generation (kept in the output); engines stop on them too. */
  stopTokenIds?: readonly number[];
}

/** What the next chunk asks of a backend. */
export interface ChunkRequest {
  /** 0-based chunk number. */
  index: number;
  /** The caller's prompt followed by every token generated so far. */
  promptTokenIds: number[];
  maxTokens: number;
}

/** One chunk as it ran: where, what it was asked and what it gave. */
export interface ChunkRecord {
  index: number;
  backend: string;
  promptTokens: number;
  maxTokens: number;
  outputTokens: number;
  finishReason: GenerateResult["finishReason"];
  policyVersion: number | null;
}

/** A divided generation's answer: one GenerateResult plus per-token versions and the chunk log. */
export interface DividedResult extends GenerateResult {
  /** The weights version of each output token (chunks may run on engines at different versions). */
  tokenPolicyVersions: (number | null)[];
  chunks: ChunkRecord[];
}

/** Plans one divided generation; see the file header. Call next() and record() in turn. */
export class ChunkPlanner {
  private readonly prompt: readonly number[];
  private readonly maxTokens: number;
  private readonly chunkTokens: number;
  private readonly stops: ReadonlySet<number>;
  private readonly ids: number[] = [];
  private readonly logprobs: number[] = [];
  private readonly versions: (number | null)[] = [];
  private readonly records: ChunkRecord[] = [];
  private finish: GenerateResult["finishReason"] | null = null;
  /** The chunk handed out by next() and not yet recorded. */
  private open: ChunkRequest | null = null;

  constructor(opts: ChunkPlannerOptions) {
    const intAtLeast1 = (field: string, v: number): void => {
      if (!Number.isInteger(v) || v < 1) throw new ArborError(`divided rollout: ${field} must be an integer >= 1, got ${v}`, "invalid_request");
    };
    intAtLeast1("maxTokens", opts.maxTokens);
    intAtLeast1("chunkTokens", opts.chunkTokens);
    intAtLeast1("maxChunks", opts.maxChunks);
    if (opts.promptTokenIds.length === 0) throw new ArborError("divided rollout: promptTokenIds must not be empty", "invalid_request");
    const needed = chunksNeeded(opts.maxTokens, opts.chunkTokens);
    if (needed > opts.maxChunks) {
      throw new ArborError(
        `divided rollout: maxTokens ${opts.maxTokens} in chunks of ${opts.chunkTokens} needs ${needed} chunks, over the limit maxChunks ${opts.maxChunks}`,
        "invalid_request",
      );
    }
    this.prompt = [...opts.promptTokenIds];
    this.maxTokens = opts.maxTokens;
    this.chunkTokens = opts.chunkTokens;
    this.stops = new Set(opts.stopTokenIds ?? []);
  }

  /** Whether the generation has ended (no further chunk will be planned). */
  get done(): boolean {
    return this.finish !== null;
  }

  /** Tokens generated so far. */
  get generated(): number {
    return this.ids.length;
  }

  /** The next chunk to run, or null once done. Throws when the previous one was not recorded. */
  next(): ChunkRequest | null {
    if (this.open) throw new ArborError(`divided rollout: chunk ${this.open.index} was planned but its outcome not recorded`, "engine");
    if (this.finish !== null) return null;
    this.open = {
      index: this.records.length,
      promptTokenIds: [...this.prompt, ...this.ids],
      maxTokens: nextChunkTokens(this.chunkTokens, this.maxTokens, this.ids.length),
    };
    return { ...this.open, promptTokenIds: [...this.open.promptTokenIds] };
  }

  /**
   * Take the open chunk's answer from `backend`. Throws ArborError "backend_protocol" when it does
   * not fit the request (more tokens than asked, misaligned logprobs, no progress without an end).
   */
  record(backend: string, r: GenerateResult): void {
    const c = this.open;
    if (!c) throw new ArborError("divided rollout: no chunk is open to record", "engine");
    const bad = (why: string): ArborError => new ArborError(`divided rollout: chunk ${c.index} from backend '${backend}' ${why}`, "backend_protocol");
    if (r.outputTokenIds.length > c.maxTokens) throw bad(`returned ${r.outputTokenIds.length} tokens, over the ${c.maxTokens} asked`);
    if (r.logprobs.length !== r.outputTokenIds.length) throw bad(`returned ${r.logprobs.length} logprobs for ${r.outputTokenIds.length} tokens`);
    if (!sameIds(r.promptTokenIds, c.promptTokenIds)) {
      throw bad(`echoed a prompt of ${r.promptTokenIds.length} tokens that is not the ${c.promptTokenIds.length} sent (continuation would not line up)`);
    }
    this.open = null;
    this.ids.push(...r.outputTokenIds);
    this.logprobs.push(...r.logprobs);
    for (let i = 0; i < r.outputTokenIds.length; i++) this.versions.push(r.policyVersion);
    this.records.push({
      index: c.index,
      backend,
      promptTokens: c.promptTokenIds.length,
      maxTokens: c.maxTokens,
      outputTokens: r.outputTokenIds.length,
      finishReason: r.finishReason,
      policyVersion: r.policyVersion,
    });
    const last = r.outputTokenIds[r.outputTokenIds.length - 1];
    const aborted = r.finishReason === "abort";
    const stopped = r.finishReason === "stop" || (last !== undefined && this.stops.has(last));
    const ended = generationEnded({ stopped, aborted, generated: this.ids.length, maxTokens: this.maxTokens, chunkAsked: c.maxTokens, chunkGot: r.outputTokenIds.length });
    if (ended) this.finish = aborted ? "abort" : stopped ? "stop" : "length";
  }

  /** The chunk handed out by next() is abandoned (its request failed or was aborted): end with "abort". */
  abort(): void {
    this.open = null;
    this.finish = "abort";
  }

  /** The generation so far as one result (finishReason "abort" while not done). */
  result(): DividedResult {
    let version: number | null = null;
    // Staleness is bounded by the oldest weights that produced any token.
    for (const v of this.versions) if (v !== null && (version === null || v < version)) version = v;
    return {
      outputTokenIds: [...this.ids],
      logprobs: [...this.logprobs],
      finishReason: this.finish ?? "abort",
      policyVersion: version,
      promptTokenIds: [...this.prompt],
      tokenPolicyVersions: [...this.versions],
      chunks: this.records.map((r) => ({ ...r })),
    };
  }
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
