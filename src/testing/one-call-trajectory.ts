// Test support: the smallest trainable trajectory — one call of a group's program answering a fixed
// prompt — and its group, for tests of the update step (rl-update, the draft alignment after it).
import type { Call, Group, Trajectory } from "../core/types.js";

/** A one-call program `i` of `group` answering `output` to a shared prompt, with reward `reward`. */
export function oneCallTrajectory(group: string, i: number, output: number[], reward: number): Trajectory {
  const id = `${group}-p${i}`;
  const call: Call = {
    id: `${id}-c0`,
    programId: id,
    index: 0,
    messages: [{ role: "user", content: "q" }],
    promptTokenIds: [1, 40, 41, 42, 43, 44],
    outputTokenIds: output,
    // Behaviour logprobs far from the near-uniform policy's: ratios ≠ 1, so the GRPO loss is not 0.
    logprobs: output.map(() => -3),
    outputText: "",
    finishReason: "stop",
    backend: "e0",
    policyVersion: 0,
    timings: { start: 0, end: 1 },
  };
  return {
    program: { id, runId: "r", taskId: `t-${group}`, groupId: group, sampleIndex: i, state: "terminated", createdAt: 0 },
    calls: [call],
    tools: [],
    reward: { total: reward, components: { outcome: reward } },
  };
}

/** The group of `size` programs `oneCallTrajectory` makes for `id`. */
export function oneCallGroup(id: string, size: number): Group {
  return { id, runId: "r", taskId: `t-${id}`, programIds: Array.from({ length: size }, (_, i) => `${id}-p${i}`) };
}
