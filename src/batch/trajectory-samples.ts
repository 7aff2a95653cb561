// Trace → samples for the batch builder. Two shapes over the same calls:
// - "per-call": one sample per trainable call (prompt ‖ output), as the gateway recorded it;
// - "merged": successive calls of one program whose prompt extends the previous prompt ‖ output become one
//   sequence (the new prompt's extra tokens — tool output, user turns — are masked); a call that does not
//   extend (a context reset or a context-management edit) starts a new segment.
// Loss masks cover model tokens only; text-only calls (`trainable: false`) are skipped.
import { ArborError } from "../core/errors.js";
import type { Call, Group, Trajectory } from "../core/types.js";
import type { BatchSample, ProgramOutcome, SampleSet } from "./batch-sample.js";

/** How calls become samples. */
export type SampleMode = "per-call" | "merged";

function fail(message: string): never {
  throw new ArborError(message, "batch");
}

function startsWith(seq: readonly number[], prefix: readonly number[]): boolean {
  if (prefix.length > seq.length) return false;
  for (let i = 0; i < prefix.length; i++) if (seq[i] !== prefix[i]) return false;
  return true;
}

/** Per-program process rewards from reward components named `step:<chunk>` (chunk = trainable-call ordinal). */
function stepRewardsOf(t: Trajectory, chunkCount: number): number[] | undefined {
  const comps = t.reward?.components ?? {};
  const keys = Object.keys(comps).filter((k) => /^step:\d+$/.test(k));
  if (keys.length === 0) return undefined;
  const out = new Array<number>(chunkCount).fill(0);
  for (const k of keys) {
    const c = Number(k.slice(5));
    if (c >= chunkCount) fail(`program '${t.program.id}': reward component '${k}' names chunk ${c} but the program has ${chunkCount}`);
    out[c] = comps[k] as number;
  }
  return out;
}

class SegmentBuilder {
  readonly tokenIds: number[] = [];
  readonly lossMask: number[] = [];
  readonly oldLogprobs: number[] = [];
  readonly versions: number[] = [];
  readonly chunks: number[] = [];
  readonly callIds: string[] = [];

  context(tokens: readonly number[]): void {
    for (const t of tokens) {
      this.tokenIds.push(t);
      this.lossMask.push(0);
      this.oldLogprobs.push(0);
      this.versions.push(-1);
      this.chunks.push(-1);
    }
  }

  output(call: Call, chunk: number): void {
    this.callIds.push(call.id);
    call.outputTokenIds.forEach((t, i) => {
      this.tokenIds.push(t);
      this.lossMask.push(1);
      this.oldLogprobs.push(call.logprobs[i] as number);
      // A call the engine resumed on new weights mid-way has older versions on its early tokens.
      this.versions.push(call.tokenPolicyVersions?.[i] ?? call.policyVersion);
      this.chunks.push(chunk);
    });
  }
}

/**
 * Convert trajectories into samples and per-program outcomes. Every program listed in `groups` must be among
 * `trajectories` and have a reward; programs in no given group are an error (never silently left out).
 * Calls are taken in index order. Throws an {@link ArborError} naming the program or call on inconsistent
 * input (logprob count ≠ output length, a missing reward, a program in two groups).
 */
export function buildSampleSet(trajectories: readonly Trajectory[], groups: readonly Group[], mode: SampleMode = "per-call"): SampleSet {
  const byId = new Map<string, Trajectory>();
  for (const t of trajectories) {
    if (byId.has(t.program.id)) fail(`program '${t.program.id}' appears twice`);
    byId.set(t.program.id, t);
  }
  const grouped = new Set<string>();
  for (const g of groups) {
    for (const id of g.programIds) {
      const t = byId.get(id);
      if (!t) fail(`group '${g.id}': program '${id}' has no trajectory`);
      if (t.program.groupId !== g.id) fail(`program '${id}' is listed in group '${g.id}' but belongs to '${t.program.groupId}'`);
      if (!t.reward || !Number.isFinite(t.reward.total)) fail(`program '${id}' has no finite reward`);
      if (grouped.has(id)) fail(`program '${id}' is listed in more than one group`);
      grouped.add(id);
    }
  }
  const samples: BatchSample[] = [];
  const programs: ProgramOutcome[] = [];
  for (const t of trajectories) {
    if (!grouped.has(t.program.id)) fail(`program '${t.program.id}' is in no given group (its group is '${t.program.groupId}')`);
    const calls = t.calls.filter((c) => c.trainable !== false).sort((a, b) => a.index - b.index);
    for (const c of calls) {
      if (c.logprobs.length !== c.outputTokenIds.length) {
        fail(`call '${c.id}' of program '${t.program.id}': ${c.logprobs.length} logprobs for ${c.outputTokenIds.length} output tokens`);
      }
      if (c.tokenPolicyVersions !== undefined && c.tokenPolicyVersions.length !== c.outputTokenIds.length) {
        fail(`call '${c.id}' of program '${t.program.id}': ${c.tokenPolicyVersions.length} tokenPolicyVersions for ${c.outputTokenIds.length} output tokens`);
      }
    }
    const base = { programId: t.program.id, groupId: t.program.groupId, taskId: t.program.taskId };
    const push = (seg: SegmentBuilder, id: string, segment: number): void => {
      samples.push({ ...base, id, segment, callIds: seg.callIds, tokenIds: seg.tokenIds, lossMask: seg.lossMask, oldLogprobs: seg.oldLogprobs, versions: seg.versions, chunks: seg.chunks });
    };
    if (mode === "per-call") {
      calls.forEach((c, k) => {
        const seg = new SegmentBuilder();
        seg.context(c.promptTokenIds);
        seg.output(c, k);
        push(seg, c.id, 0);
      });
    } else {
      let seg: SegmentBuilder | undefined;
      let segment = 0;
      calls.forEach((c, k) => {
        if (seg && !c.contextReset && startsWith(c.promptTokenIds, seg.tokenIds)) {
          seg.context(c.promptTokenIds.slice(seg.tokenIds.length));
        } else {
          if (seg) {
            push(seg, `${t.program.id}#s${segment}`, segment);
            segment++;
          }
          seg = new SegmentBuilder();
          seg.context(c.promptTokenIds);
        }
        seg.output(c, k);
      });
      if (seg) push(seg, `${t.program.id}#s${segment}`, segment);
    }
    const outcome: ProgramOutcome = {
      programId: t.program.id,
      groupId: t.program.groupId,
      reward: t.reward?.total as number,
      chunkCount: calls.length,
      chunkLengths: calls.map((c) => c.outputTokenIds.length),
    };
    const steps = stepRewardsOf(t, calls.length);
    if (steps) outcome.stepRewards = steps;
    const solved = t.reward?.components.outcome;
    if (typeof solved === "number") outcome.outcome = solved;
    programs.push(outcome);
  }
  return { samples, programs };
}
