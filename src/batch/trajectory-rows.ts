// Stored trajectories as flat rows, one per call (docs/batch-schema.md, "Trajectory export"): the exact prompt
// and output ids the engine used, their logprobs and policy versions, the call's messages and answer text, and
// the program's group, task, reward and termination. Where a batch built from the store covers the call, the row
// carries that batch's advantage of each output token, so a dataset row and the trained-on sample agree. Each row
// also says its group's iteration and attempt, and whether a kill cut that group (a later attempt's is the one trained).
import type { Group, Trajectory } from "../core/types.js";
import type { ExportedBatch } from "./export-arrow.js";

/** One chat message of a call's prompt, as exported (tool calls travel inside the JSON of `prompt_json`). */
export interface RowMessage {
  role: string;
  content: string;
}

/** One exported call. Field names are the columns of every format (snake_case, as verl and pandas read them). */
export interface TrajectoryRow {
  run_id: string;
  program_id: string;
  group_id: string;
  task_id: string;
  sample_index: number;
  call_index: number;
  call_id: string;
  /** The call's chat messages (role and content), e.g. verl's `prompt` column. */
  prompt: RowMessage[];
  /** The answer text the gateway returned (verl's `response` for SFT). */
  response: string;
  prompt_ids: number[];
  output_ids: number[];
  /** Behaviour logprob of each output token. */
  logprobs: number[];
  /** Policy version of each output token. */
  policy_versions: number[];
  finish_reason: string;
  trainable: boolean;
  context_reset: boolean;
  context_reset_reason: string | null;
  served_model: string | null;
  /** The model name the client asked for (null: none recorded). */
  requested_model: string | null;
  /** A max_tokens the gateway clamped to what the context left: asked and granted (null: served as asked). */
  max_tokens_asked: number | null;
  max_tokens_granted: number | null;
  /** The program's reward total; null when it has none. */
  reward: number | null;
  /** The reward's components as JSON text (`{"outcome":1}`); null when the program has no reward. */
  reward_components: string | null;
  termination: string | null;
  termination_detail: string | null;
  /** The iteration of its run the program's group was rolled out in (Group.iteration); null where not known (async runs). */
  iteration: number | null;
  /** The resume whose process rolled the group out (Group.attempt: 1 for the first `--resume`); null: the run's first process. */
  attempt: number | null;
  /** The group was cut by a kill and rolled out again by a later attempt: not what the trainer stepped on. */
  superseded: boolean;
  /** The policy version a held-out evaluation program scored (its group is held-out: never trained on); null for a training program. */
  held_out_version: number | null;
  /** The batch that covers this call (its id is the store run's), or null. */
  batch_id: string | null;
  /** That batch's advantage of each output token; null when no batch covers the call. */
  advantages: number[] | null;
}

/** A call's output-token advantages in `batch`, found by its trainable-call ordinal (the sample's `chunks`). */
function advantagesByCall(batch: ExportedBatch, chunkOf: ReadonlyMap<string, number>): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const s of batch.samples) {
    for (const callId of s.callIds) {
      const chunk = chunkOf.get(callId);
      if (chunk === undefined) continue;
      out.set(callId, s.advantages.filter((_, i) => s.lossMask[i] === 1 && s.chunks[i] === chunk));
    }
  }
  return out;
}

/**
 * One row per call of `trajectories` (programs in the given order, calls by index). `batches` are the batches
 * built from the same trajectories; a call in one of them gets its batch id and per-token advantages.
 * `groups`: the programs' groups by id (iteration, attempt, held-out version); `superseded`: the ids of groups cut
 * by a kill and rolled out again (store/held-out-groups.ts's supersededGroupIds).
 */
export function trajectoryRows(
  trajectories: readonly Trajectory[],
  batches: readonly ExportedBatch[] = [],
  groups: ReadonlyMap<string, Pick<Group, "iteration" | "attempt" | "heldOutVersion">> = new Map(),
  superseded: ReadonlySet<string> = new Set(),
): TrajectoryRow[] {
  // Chunk = ordinal of the call among its program's trainable calls, as the sample builder numbers them.
  const chunkOf = new Map<string, number>();
  for (const t of trajectories) {
    [...t.calls]
      .filter((c) => c.trainable !== false)
      .sort((a, b) => a.index - b.index)
      .forEach((c, k) => chunkOf.set(c.id, k));
  }
  const covered = new Map<string, { batchId: string; advantages: number[] }>();
  for (const b of batches) for (const [callId, advantages] of advantagesByCall(b, chunkOf)) covered.set(callId, { batchId: b.id, advantages });
  const rows: TrajectoryRow[] = [];
  for (const t of trajectories) {
    const p = t.program;
    for (const c of [...t.calls].sort((a, b) => a.index - b.index)) {
      const inBatch = covered.get(c.id);
      const g = groups.get(p.groupId);
      rows.push({
        run_id: p.runId,
        program_id: p.id,
        group_id: p.groupId,
        task_id: p.taskId,
        sample_index: p.sampleIndex,
        call_index: c.index,
        call_id: c.id,
        prompt: c.messages.map((m) => ({ role: m.role, content: m.content })),
        response: c.outputText,
        prompt_ids: c.promptTokenIds,
        output_ids: c.outputTokenIds,
        logprobs: c.logprobs,
        policy_versions: c.tokenPolicyVersions ?? c.outputTokenIds.map(() => c.policyVersion),
        finish_reason: c.finishReason,
        trainable: c.trainable !== false,
        context_reset: c.contextReset === true,
        context_reset_reason: c.contextResetReason ?? null,
        served_model: c.servedModel ?? null,
        requested_model: c.requestedModel ?? null,
        max_tokens_asked: c.maxTokensClamped?.asked ?? null,
        max_tokens_granted: c.maxTokensClamped?.granted ?? null,
        reward: t.reward?.total ?? null,
        reward_components: t.reward ? JSON.stringify(t.reward.components) : null,
        termination: p.termination?.kind ?? null,
        termination_detail: p.termination?.detail ?? null,
        iteration: g?.iteration ?? null,
        attempt: g?.attempt ?? null,
        superseded: superseded.has(p.groupId),
        held_out_version: g?.heldOutVersion ?? null,
        batch_id: inBatch?.batchId ?? null,
        advantages: inBatch && inBatch.advantages.length === c.outputTokenIds.length ? inBatch.advantages : null,
      });
    }
  }
  return rows;
}
