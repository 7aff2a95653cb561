// Program-aware llama.cpp sessions: one context with N sequences, each lent to one program and kept
// between its turns, so a turn that extends the program's tokens evaluates only the new ones. A
// program can be paused (its sequence state saved to L2 or the shared L3 store, or dropped) and
// restored on this engine or another one, continuing with exactly the tokens it would have produced.
import { statSync } from "node:fs";
import { copyFile } from "node:fs/promises";
import { resolve } from "node:path";
import type { LlamaContext, LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import { ArborError, CapacityError } from "../../core/errors.js";
import type { Rng } from "../../core/rng.js";
import type { EngineFinishReason } from "../executor.js";
import { evaluateTokens, openLlamaContext, type LlamaContextOptions } from "../llama-context.js";
import { sampleToken, type SampledToken } from "../sampling.js";
import { L2StateTier, type KvStateEntry, type KvStateTier } from "../kv/state-tier.js";

/** Where a program's KV is: resident in a sequence (L1), in a store, or nowhere (recompute). */
export type ProgramLocation = "L1" | "L2" | "L3" | "none";
export type PauseTarget = "L2" | "L3" | "drop";

/** `sequences`: programs resident at once. Always exact KV (F32), as pause/restore equality needs. */
export interface StatefulSessionsOptions extends Omit<LlamaContextOptions, "exactKv"> {
  /** Tokens that end a generation (included in the output). */
  stopTokenIds: readonly number[];
  /** Byte budget of this engine's private L2 store; no L2 when absent. */
  l2CapacityBytes?: number;
  /** The L3 store shared with other engines (not closed by this manager). */
  l3?: KvStateTier;
  /** Where an idle resident program goes when its sequence is needed (default L2 if any, else drop). */
  evictTo?: PauseTarget;
  /**
   * A program with no saved state starts from the longest L3 entry whose tokens prefix its prompt
   * (at least this many tokens; 0 disables, the default). The entry is copied, not consumed.
   */
  l3PrefixMinTokens?: number;
}

export interface ProgramGenerateRequest {
  programId: string;
  /** The program's full token history for this turn; a prefix already in its KV is not re-evaluated. */
  promptTokenIds: readonly number[];
  maxTokens: number;
  temperature: number;
  /** Nucleus mass in (0, 1] (default 1). */
  topP?: number;
  topLogprobs?: number;
  rng: Rng;
  signal?: AbortSignal;
  /** Called after each sampled token (index from 0); may call `pause` to stop after this token. */
  onToken?: (token: SampledToken, index: number) => void;
}

export interface ProgramGenerateResult {
  tokens: SampledToken[];
  /** `paused`: a `pause` stopped the generation; resume with prompt + tokens and the same Rng. */
  finishReason: EngineFinishReason | "paused";
  stopTokenId?: number;
  /** Prompt tokens whose KV was already there (resident or restored). */
  reusedTokens: number;
  /** Prompt tokens evaluated by this call. */
  evaluatedTokens: number;
  /** Where the program's KV came from at the start of this call. */
  restoredFrom: ProgramLocation;
}

export interface PauseResult {
  programId: string;
  from: ProgramLocation;
  to: ProgramLocation;
  /** Tokens covered by the saved state (0 when nothing was saved). */
  tokens: number;
  bytes: number;
}

export interface SessionStats {
  residentPrograms: number;
  freeSequences: number;
  reusedTokens: number;
  evaluatedTokens: number;
  /** Tokens generated (decode steps). */
  generatedTokens: number;
  restores: Record<"L2" | "L3" | "prefix", number>;
  pauses: Record<PauseTarget, number>;
  evictions: number;
}

interface ProgramRecord {
  id: string;
  where: ProgramLocation;
  seq?: LlamaContextSequence;
  /** A generate, pause or restore is in progress. */
  busy: boolean;
  lastUse: number;
  /** Pauses requested while busy; applied, in order, when the current operation ends. */
  pendingPauses: { to: PauseTarget; resolve: (r: PauseResult) => void; reject: (e: Error) => void }[];
}

/** llama.cpp session manager with per-program KV reuse, pause and restore (F32 KV, 1 thread). */
export class StatefulSessions {
  readonly vocabSize: number;
  readonly contextSize: number;
  readonly sequences: number;
  /** States are only exchanged between engines with the same compat string. */
  readonly compat: string;
  private readonly l2: KvStateTier | undefined;
  private readonly l3: KvStateTier | undefined;
  private readonly evictTo: PauseTarget;
  private readonly prefixMin: number;
  private readonly stopIds: ReadonlySet<number>;
  private readonly free: LlamaContextSequence[];
  private readonly programs = new Map<string, ProgramRecord>();
  private tick = 0;
  private closed = false;
  private readonly counters: SessionStats = {
    residentPrograms: 0,
    freeSequences: 0,
    reusedTokens: 0,
    evaluatedTokens: 0,
    generatedTokens: 0,
    restores: { L2: 0, L3: 0, prefix: 0 },
    pauses: { L2: 0, L3: 0, drop: 0 },
    evictions: 0,
  };

  private constructor(
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    opts: StatefulSessionsOptions,
  ) {
    this.vocabSize = [...model.iterateAllTokens()].length;
    this.contextSize = context.contextSize;
    this.sequences = opts.sequences;
    this.free = Array.from({ length: opts.sequences }, () => context.getSequence());
    const file = statSync(opts.modelPath);
    // llama.cpp can only load a state into the same model and a context with the same sequence count.
    this.compat = `${resolve(opts.modelPath)}:${file.size}:${Math.floor(file.mtimeMs)}|sequences=${opts.sequences}|kv=f32`;
    this.l2 = opts.l2CapacityBytes === undefined ? undefined : new L2StateTier({ capacityBytes: opts.l2CapacityBytes });
    this.l3 = opts.l3;
    this.evictTo = opts.evictTo ?? (this.l2 ? "L2" : "drop");
    this.prefixMin = opts.l3PrefixMinTokens ?? 0;
    this.stopIds = new Set(opts.stopTokenIds);
    for (const id of this.stopIds) {
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
        throw new ArborError(`stopTokenIds: ${id} is outside the model's vocabulary (size ${this.vocabSize})`, "config");
      }
    }
    if (this.evictTo !== "drop" && !this.storeFor(this.evictTo, false)) {
      throw new ArborError(`evictTo: ${this.evictTo} needs an ${this.evictTo} store`, "config");
    }
  }

  /** Load the GGUF and create one context with `sequences` sequences (settings of LlamaCppExecutor). */
  static async load(opts: StatefulSessionsOptions): Promise<StatefulSessions> {
    const { model, context } = await openLlamaContext(opts);
    try {
      return new StatefulSessions(model, context, opts);
    } catch (err) {
      await context.dispose();
      await model.dispose();
      throw err;
    }
  }

  /** Where the program's KV is now (an L3 entry saved by another engine counts). */
  location(programId: string): ProgramLocation {
    const where = this.programs.get(programId)?.where ?? "none";
    if (where === "none" && this.l3?.peek(programId)) return "L3";
    return where;
  }

  /** Token ids whose KV the program holds in its sequence (empty unless resident). */
  residentTokens(programId: string): number[] {
    return [...(this.programs.get(programId)?.seq?.contextTokens ?? [])];
  }

  stats(): SessionStats {
    let resident = 0;
    for (const p of this.programs.values()) if (p.seq) resident++;
    return {
      ...this.counters,
      restores: { ...this.counters.restores },
      pauses: { ...this.counters.pauses },
      residentPrograms: resident,
      freeSequences: this.free.length,
    };
  }

  /**
   * Generate for a program. Its KV is restored first when paused; the longest common prefix of
   * the prompt and the program's resident tokens is kept and only the rest is evaluated.
   */
  async generate(req: ProgramGenerateRequest): Promise<ProgramGenerateResult> {
    this.ensureOpen();
    const prompt = req.promptTokenIds;
    if (typeof req.programId !== "string" || req.programId.length === 0) throw new RangeError("programId must be a non-empty string");
    if (prompt.length === 0) throw new RangeError("promptTokenIds must contain at least one token");
    if (!Number.isInteger(req.maxTokens) || req.maxTokens < 1) throw new RangeError(`maxTokens must be >= 1, got ${req.maxTokens}`);
    if (prompt.length + req.maxTokens > this.contextSize) {
      throw new RangeError(`prompt (${prompt.length} tokens) + maxTokens (${req.maxTokens}) exceeds the context (${this.contextSize})`);
    }
    for (const id of prompt) {
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) throw new RangeError(`promptTokenIds: ${id} is outside the vocabulary (size ${this.vocabSize})`);
    }
    const rec = this.record(req.programId);
    if (rec.busy) throw new ArborError(`program ${rec.id} is already generating or being moved`, "busy");
    rec.busy = true;
    try {
      const restoredFrom = await this.ensureResident(rec, prompt);
      const seq = rec.seq as LlamaContextSequence;
      const resident = seq.contextTokens;
      let common = 0;
      while (common < resident.length && common < prompt.length && resident[common] === prompt[common]) common++;
      // At least the last prompt token is evaluated: its output is the next-token distribution.
      const keep = Math.min(common, prompt.length - 1);
      if (keep < resident.length) await seq.eraseContextTokenRanges([{ start: keep, end: resident.length }]);
      this.counters.reusedTokens += keep;
      this.counters.evaluatedTokens += prompt.length - keep;

      const params = { temperature: req.temperature, topP: req.topP ?? 1, topLogprobs: req.topLogprobs ?? 0 };
      const tokens: SampledToken[] = [];
      const result = (finishReason: ProgramGenerateResult["finishReason"], stopTokenId?: number): ProgramGenerateResult => ({
        tokens,
        finishReason,
        ...(stopTokenId === undefined ? {} : { stopTokenId }),
        reusedTokens: keep,
        evaluatedTokens: prompt.length - keep,
        restoredFrom,
      });
      let input: number[] = prompt.slice(keep);
      for (;;) {
        if (req.signal?.aborted) return result("abort");
        const probs = (await evaluateTokens(seq, input, true)) as Map<number, number>;
        const tok = sampleToken(probs, params, req.rng, prompt.length + tokens.length);
        this.counters.generatedTokens++;
        tokens.push(tok);
        req.onToken?.(tok, tokens.length - 1);
        if (this.stopIds.has(tok.id)) return result("stop", tok.id);
        if (tokens.length >= req.maxTokens) return result("length");
        if (rec.pendingPauses.length > 0) return result("paused");
        input = [tok.id];
      }
    } finally {
      rec.lastUse = ++this.tick;
      await this.settle(rec);
    }
  }

  /**
   * Move a program's KV out of its sequence: saved to L2 or L3 (with its token ids), or dropped
   * (the next turn recomputes). During a generation the pause takes effect after the current token
   * and the generation ends with finish reason `paused`. Moving between L2 and L3 copies the file.
   */
  pause(programId: string, to: PauseTarget): Promise<PauseResult> {
    try {
      return this.startPause(programId, to);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  private startPause(programId: string, to: PauseTarget): Promise<PauseResult> {
    this.ensureOpen();
    if (to !== "L2" && to !== "L3" && to !== "drop") return Promise.reject(new RangeError(`pause target must be L2, L3 or drop, got ${String(to)}`));
    if (to !== "drop") this.storeFor(to, true);
    const rec = this.programs.get(programId);
    if (!rec) {
      if (this.l3?.peek(programId)) {
        const r = this.record(programId);
        r.where = "L3";
        return this.startPause(programId, to);
      }
      return Promise.reject(new ArborError(`pause: unknown program ${programId}`, "not_found"));
    }
    if (rec.busy) return new Promise((res, rej) => rec.pendingPauses.push({ to, resolve: res, reject: rej }));
    rec.busy = true;
    return this.doPause(rec, to).finally(() => void this.settle(rec));
  }

  /**
   * Bring a paused program's KV back into a sequence (from this engine's L2 or the shared L3,
   * possibly saved by another engine). Returns where it came from; `none` when nothing was saved.
   */
  async restore(programId: string): Promise<ProgramLocation> {
    this.ensureOpen();
    // Nothing saved anywhere: do not take (or evict for) a sequence just to leave it empty.
    if (this.location(programId) === "none") return "none";
    const rec = this.record(programId);
    if (rec.busy) throw new ArborError(`program ${rec.id} is already generating or being moved`, "busy");
    rec.busy = true;
    try {
      return await this.ensureResident(rec, []);
    } finally {
      rec.lastUse = ++this.tick;
      await this.settle(rec);
    }
  }

  /** Forget a finished program: free its sequence and delete its saved states here and in L3. */
  async release(programId: string): Promise<void> {
    const rec = this.programs.get(programId);
    if (rec?.busy) throw new ArborError(`program ${programId} is busy`, "busy");
    if (rec?.seq) await this.freeSequence(rec);
    this.programs.delete(programId);
    this.l2?.delete(programId);
    this.l3?.delete(programId);
  }

  /** Dispose the context and model and remove this engine's L2 files (L3 belongs to its owner). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const rec of this.programs.values()) {
      for (const p of rec.pendingPauses.splice(0)) p.reject(new ArborError("engine is shut down", "closed"));
    }
    this.l2?.close();
    await this.context.dispose();
    await this.model.dispose();
  }

  private record(programId: string): ProgramRecord {
    let rec = this.programs.get(programId);
    if (!rec) {
      rec = { id: programId, where: "none", busy: false, lastUse: ++this.tick, pendingPauses: [] };
      this.programs.set(programId, rec);
    }
    return rec;
  }

  /** Apply the pauses requested while `rec` was busy, then mark it idle. */
  private async settle(rec: ProgramRecord): Promise<void> {
    for (let p = rec.pendingPauses.shift(); p; p = rec.pendingPauses.shift()) {
      try {
        p.resolve(await this.doPause(rec, p.to));
      } catch (err) {
        p.reject(err as Error);
      }
    }
    rec.busy = false;
  }

  /** Give `rec` a sequence holding its saved KV (or a shared prefix, or nothing). */
  private async ensureResident(rec: ProgramRecord, prompt: readonly number[]): Promise<ProgramLocation> {
    if (rec.seq) return "L1";
    rec.seq = await this.takeSequence(rec);
    rec.where = "L1";
    const seq = rec.seq;
    try {
      for (const tier of ["L2", "L3"] as const) {
        const store = this.storeFor(tier, false);
        const entry = store?.peek(rec.id);
        if (!store || !entry) continue;
        await this.loadEntry(seq, store, entry);
        // The program's KV now lives here; a stale copy must not be restored elsewhere later.
        store.delete(rec.id);
        this.counters.restores[tier]++;
        return tier;
      }
      if (this.prefixMin > 0 && this.l3 && prompt.length > 0) {
        const shared = this.l3.longestPrefix(prompt, this.compat, this.prefixMin);
        if (shared) {
          await this.loadEntry(seq, this.l3, shared);
          this.counters.restores.prefix++;
          return "L3";
        }
      }
      return "none";
    } catch (err) {
      await this.freeSequence(rec);
      throw err;
    }
  }

  private async loadEntry(seq: LlamaContextSequence, store: KvStateTier, entry: KvStateEntry): Promise<void> {
    if (entry.compat !== this.compat) {
      throw new ArborError(`${store.name} state ${entry.key} was saved by an incompatible engine (${entry.compat}; this engine is ${this.compat})`, "kv_incompatible");
    }
    if (entry.tokenIds.length > this.contextSize) {
      throw new ArborError(`${store.name} state ${entry.key} holds ${entry.tokenIds.length} tokens, more than the context (${this.contextSize})`, "kv_incompatible");
    }
    const loaded = await store.read(entry.key, (path) => seq.loadStateFromFile(path, { acceptRisk: true }).then(() => true));
    const got = seq.contextTokens;
    if (!loaded || got.length !== entry.tokenIds.length || got.some((t, i) => t !== entry.tokenIds[i])) {
      await seq.clearHistory();
      throw new ArborError(`${store.name} state ${entry.key} did not restore the ${entry.tokenIds.length} tokens it records`, "kv_corrupt");
    }
  }

  private async doPause(rec: ProgramRecord, to: PauseTarget): Promise<PauseResult> {
    const from = rec.where;
    const done = (dest: ProgramLocation, entry?: KvStateEntry): PauseResult => {
      rec.where = dest;
      this.counters.pauses[to]++;
      return { programId: rec.id, from, to: dest, tokens: entry?.tokenIds.length ?? 0, bytes: entry?.bytes ?? 0 };
    };
    if (to === "drop") {
      if (rec.seq) await this.freeSequence(rec);
      this.l2?.delete(rec.id);
      this.l3?.delete(rec.id);
      return done("none");
    }
    const target = this.storeFor(to, true);
    if (rec.seq) {
      const seq = rec.seq;
      const tokens = seq.contextTokens;
      if (tokens.length === 0) {
        await this.freeSequence(rec);
        return done("none");
      }
      const entry = await target.put(rec.id, tokens, this.compat, (path) => seq.saveStateToFile(path));
      await this.freeSequence(rec);
      return done(to, entry);
    }
    if (from === to) return done(to, target.peek(rec.id));
    const source = from === "L2" || from === "L3" ? this.storeFor(from, true) : undefined;
    const held = source?.peek(rec.id);
    if (!source || !held) return done("none");
    const entry = await source.read(rec.id, (path, e) => target.put(rec.id, e.tokenIds, e.compat, (dest) => copyFile(path, dest)));
    source.delete(rec.id);
    return done(entry ? to : "none", entry);
  }

  /** A free sequence, or one taken from the least recently used idle resident program. */
  private async takeSequence(forRec: ProgramRecord): Promise<LlamaContextSequence> {
    const seq = this.free.pop();
    if (seq) return seq;
    let victim: ProgramRecord | undefined;
    for (const p of this.programs.values()) {
      if (p !== forRec && p.seq && !p.busy && (!victim || p.lastUse < victim.lastUse)) victim = p;
    }
    if (!victim) throw new CapacityError("engine sequences (all busy generating)", this.sequences);
    victim.busy = true;
    try {
      try {
        await this.doPause(victim, this.evictTo);
      } catch (err) {
        // A full store must not block new work: the victim recomputes later instead (vLLM's preemption).
        if (!(err instanceof ArborError && err.code === "capacity")) throw err;
        await this.doPause(victim, "drop");
      }
      this.counters.evictions++;
    } finally {
      await this.settle(victim);
    }
    const freed = this.free.pop();
    if (!freed) throw new CapacityError("engine sequences", this.sequences);
    return freed;
  }

  private async freeSequence(rec: ProgramRecord): Promise<void> {
    const seq = rec.seq;
    if (!seq) return;
    rec.seq = undefined;
    if (rec.where === "L1") rec.where = "none";
    try {
      await seq.clearHistory();
    } finally {
      this.free.push(seq);
    }
  }

  private storeFor(tier: "L2" | "L3", required: true): KvStateTier;
  private storeFor(tier: "L2" | "L3", required: boolean): KvStateTier | undefined;
  private storeFor(tier: "L2" | "L3", required: boolean): KvStateTier | undefined {
    const store = tier === "L2" ? this.l2 : this.l3;
    if (!store && required) throw new ArborError(`no ${tier} store is configured on this engine`, "config");
    return store;
  }

  private ensureOpen(): void {
    if (this.closed) throw new ArborError("engine is shut down", "closed");
  }
}
