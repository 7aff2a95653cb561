// Runs scheduler step plans on llama.cpp: one context with one sequence per schedulable request.
// Each chunk evaluates the request's tokens [numComputedTokens, +numNewTokens) on its sequence; all
// chunks of a step are submitted together so node-llama-cpp decodes them in one batch. Sampling is
// Arbor's own (sampleToken over the temperature-0 distribution, per-request Rng), so tokens match
// LlamaCppExecutor for the same seed whatever the batching, chunking or preemption.
// Program-aware KV: a paused program's last context is saved as a sequence state to L2 (this
// runner's host store) or L3 (a store shared by engines) and loaded back for its next request.
// KV handoff (`transfer`): a finished request's context is exported as a state file (a prefill
// engine's prompt KV, sent to the global pool), and a state from another engine is imported into L2
// under a program id, so that program's next request loads it like a paused program's.
// Speculative decoding (`speculative`): after each step the runner drafts every request's next
// tokens from a SuffixDraftCache (its prompt and output, and past responses) and reports them; the
// scheduler plans them into the request's next decode chunk, and the runner verifies them exactly
// (specdec/verify-draft.ts) from one evaluation, erasing the rejected positions' KV. Requests of one
// draft group (GRPO siblings) also draft from their group's tree (Seer; an in-process GroupDraftService,
// which the engine's server also serves to other engines as /v1/specdec). With `speculative.draftService`
// the runner also sends its grouped requests' tokens to another engine's service and drafts from local
// copies of their groups synced once per step (specdec/shared-group-drafts.ts), so siblings placed on
// different engines draft each other; a step whose sync fails drafts from the in-process trees.
// With method "draft-model" the drafts are a small GGUF's greedy proposals instead (specdec/draft-model.ts):
// the draft distilled from the served policy version (`draft-vN.gguf` beside `policy-vN.gguf`), else the
// configured one; each weight sync loads a new runner, so the draft follows the policy's version.
import { randomUUID } from "node:crypto";
import { existsSync, statSync } from "node:fs";
import { copyFile, readFile, writeFile } from "node:fs/promises";
import { resolve } from "node:path";
import type { LlamaContext, LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { realClock } from "../../core/real-clock.js";
import type { ExportedState, KvTransfer, ProgramPauseTarget } from "../executor.js";
import { LlamaTokenizer } from "../llama-tokenizer.js";
import { evaluateDistributions, evaluateTokens, openLlamaContext, type LlamaContextOptions } from "../llama-context.js";
import { L2StateTier, type KvStateEntry, type KvStateTier } from "../kv/state-tier.js";
import { sampleToken, splitLogitControls, type SampledToken, type SamplingParams, type StopRule, type TokenLogprob } from "../sampling.js";
import type { DraftOptions } from "../specdec/suffix-draft.js";
import { SuffixDraftCache } from "../specdec/suffix-draft-cache.js";
import { GroupDraftService } from "../specdec/group-draft-service.js";
import { DraftServiceClient } from "../specdec/draft-service-client.js";
import { SharedGroupDrafts, type GroupOutput } from "../specdec/shared-group-drafts.js";
import { DEFAULT_MAX_SPEC_TOKENS, resolveSpeculative, type SpeculativeOptions } from "../specdec/speculative-options.js";
import { acceptedCount, verifyDraft } from "../specdec/verify-draft.js";
import { DraftModelDrafter } from "../specdec/draft-model.js";
import { draftModelPath } from "../../model/draft-model-path.js";
import type { RawLogitControls } from "../llama-context.js";
import { commonPrefix } from "../../core/common-prefix.mjs";
import type { SampledTokenOut, ScheduledChunk, StepPlan } from "../scheduler/step-plan.js";
import type { RunnerProgramKv, RunnerRequest, RunnerStepResult, SpecDecodeStats, StepRunner } from "./step-runner.js";

/** `sequences` is the scheduler's maxNumSeqs, `contextSize` its maxModelLen. */
export interface LlamaCppStepRunnerOptions extends LlamaContextOptions {
  /** Measures step durations (default the wall clock). */
  clock?: Clock;
  /** Byte budget of this runner's own L2 store of paused programs' states (default 256 MiB). */
  l2CapacityBytes?: number;
  /** The L3 store shared with other engines (not closed by this runner); no L3 when absent. */
  l3?: KvStateTier;
  /** Speculative decoding (off when absent). */
  speculative?: SpeculativeOptions;
  /**
   * Method "suffix": the in-process group service to use (an engine's server keeps one across weight
   * switches and serves it to other engines); absent: the runner's own.
   */
  groupService?: GroupDraftService;
}

/** Token accounting since load: what prefix reuse saved and what it had to recompute. */
export interface LlamaCppStepRunnerStats {
  /** Tokens evaluated in total. */
  evaluatedTokens: number;
  /** Tokens a request found already held by the free sequence it was given (prefix reuse). */
  reusedTokens: number;
  /** Tokens evaluated beyond the plan's numNewTokens: prefix-cache hits the sequence did not hold. */
  recomputedTokens: number;
  /** Tokens a request found in a paused program's state loaded for it from L2/L3. */
  loadedTokens: number;
  /** Program states loaded from L2/L3 into a sequence. */
  loadedStates: number;
  /** Program states saved to L2/L3 by pauses. */
  savedStates: number;
  /** Speculative decoding: steps that verified a draft (vllm:spec_decode_num_drafts_total). */
  numDrafts: number;
  /** Draft tokens verified (vllm:spec_decode_num_draft_tokens_total). */
  numDraftTokens: number;
  /** Draft tokens accepted (vllm:spec_decode_num_accepted_tokens_total). */
  numAcceptedTokens: number;
  /** `speculative.draftService`: steps whose grouped drafts came from the shared service's trees. */
  draftServiceSyncedSteps: number;
  /** Steps that drafted from this engine's own group trees instead (the service failed or was skipped). */
  draftServiceLocalSteps: number;
  /** Calls to the shared service that failed (unreachable, timed out or refused). */
  draftServiceFailures: number;
}

interface RunnerReq {
  /** Prompt then the tokens sampled so far. */
  tokens: number[];
  promptLength: number;
  maxTokens: number;
  params: SamplingParams;
  /** Repetition penalty (and the bias before it), applied by llama.cpp to the raw logits. */
  raw: Omit<RawLogitControls, "history"> | undefined;
  /** min_tokens' suppression of the stop tokens (the scheduler's StopRule decides the stops). */
  stop: StopRule | undefined;
  rng: RunnerRequest["rng"];
  seq: number | undefined;
  programId: string | undefined;
  /** Its draft group and how many of its output tokens that group's tree has. */
  group: { id: string; len: number } | undefined;
}

/** A program's last context: the sequence its last finished request used and what it held then. */
interface LastContext {
  seq: number;
  tokens: readonly number[];
}

/** A pause waiting for the program's running requests to give their sequences back. */
interface PendingSave {
  to: "L2" | "L3";
  waiters: { resolve: () => void; reject: (e: Error) => void }[];
}

const DEFAULT_L2_BYTES = 256 * 1024 * 1024;
/** A draft group is forgotten this long after its last update (siblings of a GRPO group run together). */
const GROUP_TTL_MS = 10 * 60 * 1000;

/** A StepRunner over one llama.cpp context; see the file header. */
export class LlamaCppStepRunner implements StepRunner {
  readonly vocabSize: number;
  readonly contextSize: number;
  /** The model's own tokenizer (llama.cpp's). */
  readonly tokenizer: LlamaTokenizer;
  private readonly seqs: LlamaContextSequence[];
  /** Sequence index → request holding it. */
  private readonly owner: (string | undefined)[];
  private readonly requests = new Map<string, RunnerReq>();
  private readonly clock: Clock;
  private readonly counters: LlamaCppStepRunnerStats = {
    evaluatedTokens: 0,
    reusedTokens: 0,
    recomputedTokens: 0,
    loadedTokens: 0,
    loadedStates: 0,
    savedStates: 0,
    numDrafts: 0,
    numDraftTokens: 0,
    numAcceptedTokens: 0,
    draftServiceSyncedSteps: 0,
    draftServiceLocalSteps: 0,
    draftServiceFailures: 0,
  };
  /** Speculative decoding's counters; only when speculation is on (see StepRunner). */
  readonly specDecodeStats?: () => SpecDecodeStats;
  /** Speculative decoding's drafter and its options (absent: off). */
  private readonly drafter: { cache: SuffixDraftCache; groups: GroupDraftService; shared: SharedGroupDrafts | undefined; options: DraftOptions } | undefined;
  /**
   * A request's sequence id in group trees: request ids restart in every executor (a weight switch's new one,
   * another engine's), and group trees outlive executors and are shared by engines, so ids get this runner's tag.
   */
  private readonly groupTag = randomUUID();
  /** Method "draft-model": the draft GGUF's drafter and the tokens it proposes per step. */
  private readonly draftModel: { drafter: DraftModelDrafter; k: number } | undefined;
  /** States are only loaded into a runner with the same compat string (model file, sequences, KV type). */
  readonly compat: string;
  readonly programs: RunnerProgramKv;
  readonly transfer: KvTransfer;
  private readonly l2: KvStateTier;
  private readonly l3: KvStateTier | undefined;
  /** Per program, its last context while the sequence may still hold it (at most one per sequence). */
  private readonly lastContext = new Map<string, LastContext>();
  private readonly pendingSaves = new Map<string, PendingSave>();
  /** Programs whose context is exported when their request finishes (KV handoff). */
  private readonly exportIntents = new Map<string, PendingSave["waiters"]>();
  /** Steps and program moves run one at a time: a save must not race a step reusing its sequence. */
  private lock: Promise<unknown> = Promise.resolve();
  private closed = false;

  private constructor(
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    opts: LlamaCppStepRunnerOptions,
    draftModel?: DraftModelDrafter,
  ) {
    this.tokenizer = new LlamaTokenizer(model);
    this.vocabSize = this.tokenizer.size;
    this.contextSize = context.contextSize;
    this.seqs = Array.from({ length: opts.sequences }, () => context.getSequence());
    this.owner = new Array<string | undefined>(opts.sequences).fill(undefined);
    this.clock = opts.clock ?? realClock;
    const file = statSync(opts.modelPath);
    // llama.cpp loads a state only into the same model and a context with the same sequence count.
    // Same format as StatefulSessions, so the two can share an L3 store.
    this.compat = `${resolve(opts.modelPath)}:${file.size}:${Math.floor(file.mtimeMs)}|sequences=${opts.sequences}|kv=${opts.exactKv === false ? "f16" : "f32"}`;
    this.l2 = new L2StateTier({ capacityBytes: opts.l2CapacityBytes ?? DEFAULT_L2_BYTES });
    this.l3 = opts.l3;
    if (opts.speculative && draftModel) {
      this.draftModel = { drafter: draftModel, k: resolveSpeculative(opts.speculative).draft.maxSpecTokens ?? DEFAULT_MAX_SPEC_TOKENS };
      this.specDecodeStats = () => ({ numDrafts: this.counters.numDrafts, numDraftTokens: this.counters.numDraftTokens, numAcceptedTokens: this.counters.numAcceptedTokens });
    } else if (opts.speculative) {
      const spec = resolveSpeculative(opts.speculative);
      const withService = spec.draftService !== undefined;
      // The scheduler bounds the requests and their length: the drafter must never refuse one.
      const cache = new SuffixDraftCache({ ...spec.cache, maxActiveRequests: Number.MAX_SAFE_INTEGER, maxRequestTokens: Math.max(context.contextSize, 1) });
      const groups = opts.groupService ?? new GroupDraftService({ clock: this.clock });
      const shared = spec.draftService
        ? new SharedGroupDrafts(new DraftServiceClient(spec.draftService.url, undefined, spec.draftService.timeoutMs !== undefined ? { timeoutMs: spec.draftService.timeoutMs } : {}), {
            ttlMs: GROUP_TTL_MS,
          })
        : undefined;
      this.drafter = { cache, groups, shared, options: spec.draft };
      this.specDecodeStats = () => {
        const s = this.stats();
        const base = { numDrafts: s.numDrafts, numDraftTokens: s.numDraftTokens, numAcceptedTokens: s.numAcceptedTokens };
        return withService ? { ...base, draftServiceFailures: s.draftServiceFailures, draftServiceLocalSteps: s.draftServiceLocalSteps } : base;
      };
    }
    this.programs = {
      tiers: this.l3 ? ["L2", "L3"] : ["L2"],
      pauseProgram: (id, to) => this.pauseProgram(id, to),
      programKv: (id) => this.programKv(id),
      prefetchProgram: (id) => this.prefetchProgram(id),
    };
    this.transfer = {
      compat: this.compat,
      exportState: (id) => this.exportState(id),
      importState: (id, tokens, compat, data) => this.importState(id, tokens, compat, data),
      discardState: (id) => this.discardState(id),
    };
  }

  /** Load the GGUF and create a context of `sequences` sequences (threads 1, exact KV by default). */
  static async load(opts: LlamaCppStepRunnerOptions): Promise<LlamaCppStepRunner> {
    const spec = opts.speculative ? resolveSpeculative(opts.speculative) : undefined;
    const draftPath = spec?.method === "draft-model" ? draftGguf(opts.modelPath, spec.draftModel) : undefined;
    const { model, context } = await openLlamaContext(opts);
    let drafter: DraftModelDrafter | undefined;
    try {
      if (draftPath !== undefined) {
        drafter = await DraftModelDrafter.load({
          modelPath: draftPath,
          sequences: opts.sequences,
          contextSize: opts.contextSize,
          vocabSize: new LlamaTokenizer(model).size,
          ...(opts.gpu !== undefined ? { gpu: opts.gpu } : {}),
        });
      }
      return new LlamaCppStepRunner(model, context, opts, drafter);
    } catch (err) {
      await drafter?.close();
      await context.dispose();
      await model.dispose();
      throw err;
    }
  }

  /** Plain-text tokenization (no BOS). */
  tokenize(text: string): number[] {
    return this.model.tokenize(text, false);
  }

  stats(): LlamaCppStepRunnerStats {
    const shared = this.drafter?.shared?.stats();
    return shared
      ? { ...this.counters, draftServiceSyncedSteps: shared.syncedSteps, draftServiceLocalSteps: shared.localSteps, draftServiceFailures: shared.failures }
      : { ...this.counters };
  }

  /** The tokens a sequence holds (tests and debugging). */
  sequenceTokens(index: number): number[] {
    const s = this.seqs[index];
    if (!s) throw new RangeError(`no sequence ${index}`);
    return [...s.contextTokens];
  }

  /** The sequence a request holds, if any. */
  sequenceOf(requestId: string): number | undefined {
    return this.requests.get(requestId)?.seq;
  }

  addRequest(requestId: string, req: RunnerRequest): void {
    if (this.requests.has(requestId)) throw new ArborError(`llama.cpp runner: request ${requestId} is already registered`, "engine");
    const { raw, logitBias } = splitLogitControls(req.controls ?? {});
    this.drafter?.cache.startRequest(requestId, req.promptTokenIds);
    this.requests.set(requestId, {
      tokens: [...req.promptTokenIds],
      promptLength: req.promptTokenIds.length,
      maxTokens: req.maxTokens,
      params: { temperature: req.temperature, topP: req.topP, topLogprobs: req.topLogprobs, ...(logitBias ? { logitBias } : {}) },
      raw,
      stop: req.stop,
      rng: req.rng,
      seq: undefined,
      programId: req.programId,
      group: this.drafter && req.draftGroupId !== undefined ? { id: req.draftGroupId, len: 0 } : undefined,
    });
  }

  removeRequest(requestId: string): void {
    const r = this.requests.get(requestId);
    if (!r) return;
    // The program's last context: what its sequence holds now, until another request takes it.
    if (r.programId !== undefined && r.seq !== undefined) {
      this.lastContext.set(r.programId, { seq: r.seq, tokens: [...(this.seqs[r.seq] as LlamaContextSequence).contextTokens] });
    }
    // An export waits for this: it becomes a save to L2, flushed before the step assigns sequences.
    const intents = r.programId !== undefined ? this.exportIntents.get(r.programId) : undefined;
    if (intents && r.programId !== undefined) {
      this.exportIntents.delete(r.programId);
      const p = this.pendingSaves.get(r.programId) ?? { to: "L2", waiters: [] };
      p.to = "L2";
      p.waiters.push(...intents);
      this.pendingSaves.set(r.programId, p);
    }
    this.release(r);
    this.requests.delete(requestId);
    // Its response stays in the global tree for later requests' drafts.
    this.drafter?.cache.stopRequest(requestId);
    if (this.drafter?.shared && r.group) {
      const live = new Set<string>();
      for (const o of this.requests.values()) if (o.group) live.add(o.group.id);
      this.drafter.shared.forget(`${this.groupTag}/${requestId}`, live);
    }
    this.draftModel?.drafter.release(requestId);
  }

  run(plan: StepPlan): Promise<RunnerStepResult> {
    return this.exclusive(() => this.runStep(plan));
  }

  private async runStep(plan: StepPlan): Promise<RunnerStepResult> {
    if (this.closed) throw new ArborError("llama.cpp runner is closed", "closed");
    const start = this.clock.now();
    // Finished and preempted requests give their sequence back; its tokens stay for prefix reuse.
    for (const id of plan.finished) this.removeRequest(id);
    for (const id of plan.preempted) {
      const r = this.requests.get(id);
      if (r) this.release(r);
    }
    // Pauses that waited for these sequences save their program's context before anyone reuses it.
    await this.flushSaves();
    if (plan.chunks.length === 0) return { stepId: plan.stepId, sampled: [], durationMs: 0 };
    // By chunk (StepResult): work[i] is chunks[i].
    const none = <T>(): (T | undefined)[] => plan.chunks.map(() => undefined);
    const sampled = none<SampledTokenOut>();
    const top = none<TokenLogprob[]>();
    const moreTokens = none<SampledTokenOut[]>();
    const moreTop = none<TokenLogprob[][]>();
    const drafts = none<number[]>();

    const work: { id: string; r: RunnerReq; c: ScheduledChunk; from: number; fresh: boolean; loaded: boolean }[] = [];
    const loads: { w: (typeof work)[number]; store: KvStateTier; entry: KvStateEntry }[] = [];
    for (const c of plan.chunks) {
      const r = this.requests.get(c.requestId);
      if (!r) throw new ArborError(`step ${plan.stepId}: request ${c.requestId} is not registered with the llama.cpp runner`, "engine");
      const end = tokensEnd(c);
      if (end > r.tokens.length) {
        throw new ArborError(`step ${plan.stepId}: request ${c.requestId} has ${r.tokens.length} tokens, the plan computes up to ${end}`, "engine");
      }
      const fresh = r.seq === undefined;
      const w = { id: c.requestId, r, c, from: 0, fresh, loaded: false };
      if (fresh) {
        const saved = this.assign(c.requestId, r, end);
        if (saved) loads.push({ w, ...saved });
      }
      work.push(w);
    }
    // Saved program states go in first; a failed load falls back to recomputing.
    await Promise.all(loads.map(async (l) => (l.w.loaded = await this.loadState(l.w.r, l.store, l.entry))));
    // Make each sequence hold exactly the tokens it keeps (erasures first, then one batched evaluate).
    await Promise.all(work.map(async (w) => (w.from = await this.align(w.r, w.c, w.fresh, w.loaded))));
    const outs = await Promise.all(work.map((w) => this.evaluate(w.r, w.from, w.c)));
    const erasures: Promise<void>[] = [];
    /** Requests that draft for their next step; k: their chunk's index. */
    const modelDrafts: { k: number; id: string; r: RunnerReq }[] = [];
    const suffixDrafts: { k: number; id: string; r: RunnerReq }[] = [];
    for (let i = 0; i < work.length; i++) {
      const w = work[i] as (typeof work)[number];
      const dists = outs[i];
      if (!dists) continue;
      const draft = w.c.draftTokenIds ?? [];
      const emitted = this.verify(w.r, draft, dists, tokensEnd(w.c));
      // The tokens are fed back by the next decode chunk; the scheduler keeps the same list.
      for (const t of emitted) w.r.tokens.push(t.id);
      const [first, ...rest] = emitted as [SampledToken, ...SampledToken[]];
      sampled[i] = { tokenId: first.id, logprob: first.logprob };
      if (first.top.length > 0) top[i] = first.top;
      if (rest.length > 0) {
        moreTokens[i] = rest.map((t) => ({ tokenId: t.id, logprob: t.logprob }));
        if (rest.some((t) => t.top.length > 0)) moreTop[i] = rest.map((t) => t.top);
      }
      if (draft.length > 0) {
        const accepted = acceptedCount(draft, emitted);
        this.counters.numDrafts++;
        this.counters.numDraftTokens += draft.length;
        this.counters.numAcceptedTokens += accepted;
        // The sequence keeps exactly the accepted tokens: the last emitted one is fed next step.
        const seq = this.seqs[w.r.seq as number] as LlamaContextSequence;
        const valid = w.r.tokens.length - 1;
        if (seq.nextTokenIndex > valid) erasures.push(seq.eraseContextTokenRanges([{ start: valid, end: seq.nextTokenIndex }]));
      }
      if (this.drafter) {
        const ids = emitted.map((t) => t.id);
        this.drafter.cache.addResponse(w.id, ids);
        this.updateGroup(w.id, w.r, ids);
        if (!this.ended(w.r, emitted)) suffixDrafts.push({ k: i, id: w.id, r: w.r });
      }
      if (this.draftModel && !this.ended(w.r, emitted)) modelDrafts.push({ k: i, id: w.id, r: w.r });
    }
    await Promise.all(erasures);
    if (this.drafter) {
      const d = this.drafter;
      // The shared service (if any) gets every grouped request's new tokens, ended ones included (their
      // siblings elsewhere draft from them); the groups about to draft are synced once for the step.
      const shared = d.shared ? await d.shared.step(this.groupOutputs(work.map((w) => w.id)), suffixDrafts.flatMap((x) => (x.r.group ? [x.r.group.id] : []))) : false;
      for (const { k, id, r } of suffixDrafts) {
        const g = r.group;
        const fromService = g && shared ? d.shared?.draft(g.id, r.tokens, d.options) : undefined;
        const groupDraft = g ? (fromService ?? d.groups.draft({ groupId: g.id, context: r.tokens, ...d.options })) : undefined;
        const next = d.cache.draft(id, r.tokens, d.options, groupDraft).tokens;
        if (next.length > 0) drafts[k] = next;
      }
    }
    if (this.draftModel && modelDrafts.length > 0) {
      // All requests drafted together: one draft-model decode per draft position for the whole step.
      const proposals = await this.draftModel.drafter.draftBatch(modelDrafts.map(({ id, r }) => ({ requestId: id, tokens: r.tokens })), this.draftModel.k);
      modelDrafts.forEach(({ k }, i) => {
        const next = proposals[i] as number[];
        if (next.length > 0) drafts[k] = next;
      });
    }
    return {
      stepId: plan.stepId,
      sampled,
      top,
      // The optional lists only when some chunk has an entry (as the maps they replaced, only when not empty).
      ...(moreTokens.some(Boolean) ? { moreTokens } : {}),
      ...(moreTop.some(Boolean) ? { moreTop } : {}),
      ...(drafts.some(Boolean) ? { drafts } : {}),
      durationMs: this.clock.now() - start,
    };
  }

  /**
   * Sample the chunk's token(s) at `pos` (the new token's sequence position) and on: one token
   * without a draft, else the verified run (see specdec/verify-draft.ts), cut at the request's
   * stop rule and max_tokens as the scheduler cuts it.
   */
  private verify(r: RunnerReq, draft: readonly number[], dists: Map<number, number>[], pos: number): SampledToken[] {
    const outputs = r.tokens.length - r.promptLength;
    return verifyDraft(
      draft,
      dists,
      (probs, i) => {
        const suppress = r.stop?.suppressAt(outputs + i);
        return sampleToken(probs, suppress ? { ...r.params, suppress } : r.params, r.rng, pos + i);
      },
      (t, n) => endsAt(r, t.id, outputs + n),
    );
  }

  /**
   * Add the request's new output tokens to its draft group's in-process tree (nothing without a group).
   * The group lives while its members keep updating it (GROUP_TTL_MS after the last).
   */
  private updateGroup(requestId: string, r: RunnerReq, newTokens: readonly number[]): void {
    const g = r.group;
    const groups = this.drafter?.groups;
    if (!g || !groups) return;
    groups.registerGroup(g.id, GROUP_TTL_MS);
    const sequenceId = `${this.groupTag}/${requestId}`;
    try {
      groups.update(g.id, sequenceId, g.len, newTokens);
    } catch (err) {
      // The group expired or was evicted and has just been created afresh: it gets the whole output.
      if (!(err instanceof ArborError)) throw err;
      groups.update(g.id, sequenceId, 0, r.tokens.slice(r.promptLength));
    }
    g.len = r.tokens.length - r.promptLength;
  }

  /** The grouped requests' outputs so far, for the shared draft service. */
  private groupOutputs(ids: readonly string[]): GroupOutput[] {
    const out: GroupOutput[] = [];
    for (const id of ids) {
      const r = this.requests.get(id);
      if (r?.group) out.push({ requestId: `${this.groupTag}/${id}`, groupId: r.group.id, output: r.tokens.slice(r.promptLength) });
    }
    return out;
  }

  /** Whether the request's last emitted token ended it (stop rule or max_tokens): nothing to draft for. */
  private ended(r: RunnerReq, emitted: readonly SampledToken[]): boolean {
    return endsAt(r, (emitted[emitted.length - 1] as SampledToken).id, r.tokens.length - r.promptLength);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.exclusive(async () => {
      if (this.closed) return;
      this.closed = true;
      const err = new ArborError("llama.cpp runner is closed", "closed");
      for (const p of this.pendingSaves.values()) for (const w of p.waiters) w.reject(err);
      this.pendingSaves.clear();
      for (const ws of this.exportIntents.values()) for (const w of ws) w.reject(err);
      this.exportIntents.clear();
      this.l2.close();
      await this.draftModel?.drafter.close();
      await this.context.dispose();
      await this.model.dispose();
    });
  }

  /** Run `fn` after every step or program move already started. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const out = this.lock.then(fn);
    this.lock = out.catch(() => undefined);
    return out;
  }

  private async pauseProgram(programId: string, to: ProgramPauseTarget): Promise<void> {
    if (to !== "L2" && to !== "L3" && to !== "drop") throw new ArborError(`pause target must be "L2", "L3" or "drop", got ${String(to)}`, "invalid_request");
    if (to === "L3" && !this.l3) throw new ArborError("no L3 store is configured on this engine", "invalid_request");
    let wait: Promise<void> | undefined;
    await this.exclusive(async () => {
      if (this.closed) throw new ArborError("llama.cpp runner is closed", "closed");
      const pending = this.pendingSaves.get(programId);
      if (to === "drop") {
        this.pendingSaves.delete(programId);
        for (const w of pending?.waiters ?? []) w.resolve();
        this.lastContext.delete(programId);
        this.l2.delete(programId);
        this.l3?.delete(programId);
        return;
      }
      if (!this.holdsSequence(programId)) {
        await this.save(programId, to);
        return;
      }
      // Its request still runs (or finished but its sequence is not handed back yet): save after.
      wait = new Promise<void>((res, rej) => {
        const p = pending ?? { to, waiters: [] };
        p.to = to;
        p.waiters.push({ resolve: res, reject: rej });
        this.pendingSaves.set(programId, p);
      });
    });
    if (wait) await wait;
  }

  /**
   * Registered at once (synchronously): when the program's request finishes, its context is saved to
   * L2 in that step (removeRequest, then flushSaves, before any sequence is reassigned), then read
   * out and dropped here.
   */
  private exportState(programId: string): Promise<ExportedState | undefined> {
    if (this.closed) return Promise.reject(new ArborError("llama.cpp runner is closed", "closed"));
    const saved = new Promise<void>((resolve, reject) => {
      const ws = this.exportIntents.get(programId) ?? [];
      ws.push({ resolve, reject });
      this.exportIntents.set(programId, ws);
    });
    return saved.then(() =>
      this.exclusive(async () => {
        if (this.closed) throw new ArborError("llama.cpp runner is closed", "closed");
        if (!this.l2.peek(programId)) return undefined;
        try {
          return await this.l2.read(programId, async (path, entry) => ({ entry, data: await readFile(path) }));
        } finally {
          this.l2.delete(programId);
        }
      }),
    );
  }

  /** Put another engine's state into L2 under `programId`: that program's next request loads it. */
  private async importState(programId: string, tokenIds: readonly number[], compat: string, data: Uint8Array): Promise<void> {
    if (compat !== this.compat) {
      throw new ArborError(`KV state for ${programId} comes from an engine of another shape (${compat}); this engine loads states of ${this.compat}`, "kv_incompatible");
    }
    if (tokenIds.length > this.contextSize) {
      throw new ArborError(`KV state for ${programId} covers ${tokenIds.length} tokens, more than this engine's context (${this.contextSize})`, "kv_incompatible");
    }
    await this.exclusive(async () => {
      if (this.closed) throw new ArborError("llama.cpp runner is closed", "closed");
      await this.l2.put(programId, tokenIds, compat, (path) => writeFile(path, data));
    });
  }

  /** Drop an imported state and cancel a pending export (it resolves with nothing). */
  private discardState(programId: string): boolean {
    const intents = this.exportIntents.get(programId);
    this.exportIntents.delete(programId);
    for (const w of intents ?? []) w.resolve();
    return this.l2.delete(programId);
  }

  private holdsSequence(programId: string): boolean {
    for (const r of this.requests.values()) if (r.programId === programId && r.seq !== undefined) return true;
    return false;
  }

  private async flushSaves(): Promise<void> {
    for (const [id, p] of [...this.pendingSaves]) {
      if (this.holdsSequence(id)) continue;
      this.pendingSaves.delete(id);
      try {
        await this.save(id, p.to);
        for (const w of p.waiters) w.resolve();
      } catch (err) {
        for (const w of p.waiters) w.reject(err as Error);
      }
    }
  }

  /**
   * Save the program's last context (if its sequence still holds it) to `to` and clear that
   * sequence: the KV moves out of L1. With no intact context, a state in the other tier moves.
   */
  private async save(programId: string, to: "L2" | "L3"): Promise<void> {
    const store = this.storeFor(to);
    const other = to === "L2" ? this.l3 : this.l2;
    const last = this.lastContext.get(programId);
    this.lastContext.delete(programId);
    if (last && this.owner[last.seq] === undefined) {
      const seq = this.seqs[last.seq] as LlamaContextSequence;
      const tokens = [...seq.contextTokens];
      if (tokens.length > 0 && commonPrefix(tokens, last.tokens, last.tokens.length) === last.tokens.length) {
        await store.put(programId, tokens, this.compat, (path) => seq.saveStateToFile(path));
        other?.delete(programId);
        this.counters.savedStates++;
        await seq.clearHistory();
        return;
      }
    }
    const held = other?.peek(programId);
    if (other && held && held.compat === this.compat) {
      await other.read(programId, (path, e) => store.put(programId, e.tokenIds, e.compat, (dest) => copyFile(path, dest)));
      other.delete(programId);
    }
  }

  private async prefetchProgram(programId: string): Promise<void> {
    // What L3 knows may be stale (another engine took the state and put a newer one): ask again.
    const where = this.programKv(programId).where;
    if (!this.l3?.prefetch || where === "L1" || where === "L2") return;
    await this.l3.prefetch(programId);
  }

  private programKv(programId: string): { where: "L1" | "L2" | "L3" | "none"; tokens: number } {
    let tokens = 0;
    for (const r of this.requests.values()) {
      if (r.programId === programId && r.seq !== undefined) tokens = Math.max(tokens, (this.seqs[r.seq] as LlamaContextSequence).nextTokenIndex);
    }
    const last = this.lastContext.get(programId);
    if (last && this.owner[last.seq] === undefined) {
      const held = (this.seqs[last.seq] as LlamaContextSequence).contextTokens;
      if (commonPrefix(held, last.tokens, last.tokens.length) === last.tokens.length) tokens = Math.max(tokens, held.length);
    }
    if (tokens > 0) return { where: "L1", tokens };
    for (const [tier, store] of [["L2", this.l2], ["L3", this.l3]] as const) {
      const e = store?.peek(programId);
      if (e && e.compat === this.compat) return { where: tier, tokens: e.tokenIds.length };
    }
    return { where: "none", tokens: 0 };
  }

  private storeFor(tier: "L2" | "L3"): KvStateTier {
    const store = tier === "L2" ? this.l2 : this.l3;
    if (!store) throw new ArborError(`no ${tier} store is configured on this engine`, "invalid_request");
    return store;
  }

  /** The saved state of the request's program that covers the most of its first `end` tokens. */
  private savedState(r: RunnerReq, end: number): { store: KvStateTier; entry: KvStateEntry; len: number } | undefined {
    if (r.programId === undefined) return undefined;
    let best: { store: KvStateTier; entry: KvStateEntry; len: number } | undefined;
    for (const store of [this.l2, this.l3]) {
      const entry = store?.peek(r.programId);
      if (!store || !entry || entry.compat !== this.compat || entry.tokenIds.length > this.contextSize) continue;
      const len = commonPrefix(entry.tokenIds, r.tokens, end);
      if (!best || len > best.len) best = { store, entry, len };
    }
    return best;
  }

  /** Load a saved program state into the request's (already assigned) sequence; false if it failed. */
  private async loadState(r: RunnerReq, store: KvStateTier, entry: KvStateEntry): Promise<boolean> {
    const seq = this.seqs[r.seq as number] as LlamaContextSequence;
    await seq.clearHistory();
    try {
      await store.read(entry.key, (path) => seq.loadStateFromFile(path, { acceptRisk: true }));
    } catch {
      // An unreadable state costs a recompute, not the request.
    }
    const got = seq.contextTokens;
    if (got.length !== entry.tokenIds.length || got.some((t, i) => t !== entry.tokenIds[i])) {
      await seq.clearHistory();
      return false;
    }
    // The program's KV lives in this sequence now; a stale copy must not be loaded elsewhere later.
    store.delete(entry.key);
    this.counters.loadedStates++;
    return true;
  }

  private release(r: RunnerReq): void {
    if (r.seq !== undefined) this.owner[r.seq] = undefined;
    r.seq = undefined;
  }

  /**
   * Give a request the free sequence sharing the longest prefix with its first `end` tokens, or,
   * when its program's saved state covers more, the emptiest free sequence to load that state into.
   */
  private assign(requestId: string, r: RunnerReq, end: number): { store: KvStateTier; entry: KvStateEntry } | undefined {
    let best = -1;
    let bestLen = -1;
    let emptiest = -1;
    for (let i = 0; i < this.seqs.length; i++) {
      if (this.owner[i] !== undefined) continue;
      const held = (this.seqs[i] as LlamaContextSequence).contextTokens;
      const n = commonPrefix(held, r.tokens, end);
      if (n > bestLen) {
        best = i;
        bestLen = n;
      }
      if (emptiest < 0 || held.length < (this.seqs[emptiest] as LlamaContextSequence).contextTokens.length) emptiest = i;
    }
    // The scheduler runs at most maxNumSeqs requests, and each holds at most one sequence.
    if (best < 0) throw new ArborError(`llama.cpp runner: no free sequence for ${requestId} (more running requests than sequences)`, "engine");
    const saved = this.savedState(r, end);
    const load = saved !== undefined && saved.len > bestLen;
    const seq = load ? emptiest : best;
    this.owner[seq] = requestId;
    r.seq = seq;
    // Whatever another program's last context was in this sequence, it will not stay intact.
    for (const [id, last] of this.lastContext) if (last.seq === seq) this.lastContext.delete(id);
    return load ? { store: saved.store, entry: saved.entry } : undefined;
  }

  /**
   * Erase what the request's sequence holds beyond its usable prefix; returns the position from
   * which the chunk must be evaluated (numComputedTokens, or less when the sequence lacks part of it).
   */
  private async align(r: RunnerReq, c: ScheduledChunk, fresh: boolean, loaded: boolean): Promise<number> {
    const seq = this.seqs[r.seq as number] as LlamaContextSequence;
    const end = tokensEnd(c);
    // A sampling chunk evaluates at least its last token: that position's output is the distribution.
    const cap = c.samples ? end - 1 : end;
    const held = seq.nextTokenIndex;
    // A request that kept its sequence since its last step holds its own tokens, so the count is
    // enough; a fresh one's sequence may hold as many tokens of another prompt: compare them.
    const keep = !fresh && held === c.numComputedTokens && held <= cap ? held : commonPrefix(seq.contextTokens, r.tokens, cap);
    if (keep < held) await seq.eraseContextTokenRanges([{ start: keep, end: held }]);
    if (fresh && loaded) this.counters.loadedTokens += keep;
    else if (fresh) this.counters.reusedTokens += keep;
    this.counters.recomputedTokens += Math.max(0, c.numComputedTokens - keep);
    return keep;
  }

  /**
   * Evaluate tokens [from, end) of the chunk, then its draft tokens; when it samples, the
   * next-token distribution after its last token, or after its last token and each draft token.
   */
  private async evaluate(r: RunnerReq, from: number, c: ScheduledChunk): Promise<Map<number, number>[] | undefined> {
    const seq = this.seqs[r.seq as number] as LlamaContextSequence;
    const end = tokensEnd(c);
    const draft = c.draftTokenIds ?? [];
    if (from >= end) return undefined;
    const tokens = [...r.tokens.slice(from, end), ...draft];
    this.counters.evaluatedTokens += tokens.length;
    if (!c.samples) return void (await evaluateTokens(seq, tokens, false));
    // Each sampled position's penalty covers every token before it: the prompt, the output so far and
    // the draft tokens before it.
    const raw = r.raw;
    return evaluateDistributions(seq, tokens, draft.length + 1, (i) => (raw ? { ...raw, history: [...r.tokens.slice(0, end), ...draft.slice(0, i)] } : undefined));
  }
}

/** Whether token `id` as the request's `outputs`-th output ends it: its stop rule, or max_tokens reached. */
function endsAt(r: RunnerReq, id: number, outputs: number): boolean {
  return (r.stop?.stopsAt(id, outputs) ?? false) || outputs >= r.maxTokens;
}

/** Where the chunk's own tokens end: its draft tokens (not yet the request's) come after. */
function tokensEnd(c: ScheduledChunk): number {
  return c.numComputedTokens + c.numNewTokens - (c.draftTokenIds?.length ?? 0);
}

/**
 * The draft GGUF for method "draft-model": the one distilled from the served policy version when it lies
 * beside the checkpoint (`draft-vN.gguf`), else `configured`. ArborError "config" when there is neither.
 */
function draftGguf(policyPath: string, configured: string | undefined): string {
  let beside: string | undefined;
  try {
    beside = draftModelPath(policyPath);
  } catch {
    // Not a versioned checkpoint (a shipped or user model): only the configured draft applies.
  }
  if (beside !== undefined && existsSync(beside)) return beside;
  if (configured !== undefined) return configured;
  throw new ArborError(`speculative.draftModel: method "draft-model" needs a draft GGUF, and none lies beside ${policyPath}${beside !== undefined ? ` (${beside})` : ""}`, "config");
}
