// Trace → training sample conversion: one sample per LLM call, token-in/token-out (the engine's
// exact ids and logprobs, never re-tokenised), with the program's GRPO advantage broadcast to every
// call of the program (Agent Lightning style credit assignment).
import { ArborError } from "../core/errors.js";
import type { Call, Group, Trajectory } from "../core/types.js";
import { grpoAdvantages } from "./grpo.js";

/** One training row: the prompt and output tokens of one call, with its loss mask and advantage. */
export interface TrainingSample {
  programId: string;
  groupId: string;
  taskId: string;
  callId: string;
  callIndex: number;
  /** Policy version that generated the output tokens. */
  policyVersion: number;
  /** Prompt token ids followed by output token ids. */
  tokenIds: number[];
  /** 0 over prompt tokens, 1 over the call's output tokens (the only tokens the model produced). */
  lossMask: number[];
  /** 0 at prompt positions; the behaviour policy's logprob at output positions. */
  oldLogprobs: number[];
  /** The program's group-normalised advantage (same for every call of the program). */
  advantage: number;
  /** The program's reward total. */
  reward: number;
}

function fail(message: string): never {
  throw new ArborError(message, "batch");
}

function sampleOf(t: Trajectory, call: Call, advantage: number, reward: number): TrainingSample {
  const p = call.promptTokenIds.length;
  const o = call.outputTokenIds.length;
  if (call.logprobs.length !== o) {
    fail(`call '${call.id}' of program '${t.program.id}': ${call.logprobs.length} logprobs for ${o} output tokens`);
  }
  const lossMask = new Array<number>(p + o).fill(0, 0, p).fill(1, p);
  const oldLogprobs = new Array<number>(p).fill(0).concat(call.logprobs);
  return {
    programId: t.program.id,
    groupId: t.program.groupId,
    taskId: t.program.taskId,
    callId: call.id,
    callIndex: call.index,
    policyVersion: call.policyVersion,
    tokenIds: call.promptTokenIds.concat(call.outputTokenIds),
    lossMask,
    oldLogprobs,
    advantage,
    reward,
  };
}

/**
 * Build one sample per trainable call (text-only calls, `trainable: false`, are skipped), in
 * trajectory order and call-index order. Advantages are computed
 * once per group from its programs' reward totals ({@link grpoAdvantages}). Throws an
 * {@link ArborError} naming the program when a program has no reward, belongs to no given group,
 * or a group lists a program that is not among `trajectories`.
 */
export function buildSamples(trajectories: readonly Trajectory[], groups: readonly Group[], eps = 1e-6): TrainingSample[] {
  const byId = new Map<string, Trajectory>();
  for (const t of trajectories) {
    if (byId.has(t.program.id)) fail(`program '${t.program.id}' appears twice`);
    byId.set(t.program.id, t);
  }
  const advantageOf = new Map<string, number>();
  for (const g of groups) {
    const rewards = g.programIds.map((id) => {
      const t = byId.get(id);
      if (!t) fail(`group '${g.id}': program '${id}' has no trajectory`);
      if (t.program.groupId !== g.id) fail(`program '${id}' is listed in group '${g.id}' but belongs to '${t.program.groupId}'`);
      if (!t.reward) fail(`program '${id}' has no reward`);
      return t.reward.total;
    });
    const adv = grpoAdvantages(rewards, eps);
    g.programIds.forEach((id, i) => {
      if (advantageOf.has(id)) fail(`program '${id}' is listed in more than one group`);
      advantageOf.set(id, adv[i] as number);
    });
  }
  const samples: TrainingSample[] = [];
  for (const t of trajectories) {
    const advantage = advantageOf.get(t.program.id);
    if (advantage === undefined) fail(`program '${t.program.id}' is in no given group (its group is '${t.program.groupId}')`);
    const reward = t.reward?.total as number;
    // Text-only calls (generic OpenAI backends) have no engine token ids: never train on them.
    const calls = t.calls.filter((c) => c.trainable !== false).sort((a, b) => a.index - b.index);
    for (const c of calls) samples.push(sampleOf(t, c, advantage, reward));
  }
  return samples;
}
