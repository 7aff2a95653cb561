// Sample sets for estimator tests: programs with chosen rewards and chunk layouts.
import type { BatchSample, ProgramOutcome, SampleSet } from "../batch/batch-sample.js";

/** One program: its reward and the output lengths of its chunks; `steps` are optional process rewards. */
export interface FixtureProgram {
  id: string;
  group: string;
  reward: number;
  chunks: number[];
  steps?: number[];
  /** The reward's outcome component (solved at 1). */
  outcome?: number;
}

/**
 * A merged-mode sample set: each program is one sample `[prompt, out(chunk 0), tool, out(chunk 1), …]`, sharing
 * the prompt token 1 so the samples also share a prefix. Token ids encode program/chunk/position.
 */
export function fixtureSet(programs: readonly FixtureProgram[]): SampleSet {
  const samples: BatchSample[] = [];
  const outcomes: ProgramOutcome[] = [];
  programs.forEach((p, pi) => {
    const s: BatchSample = { id: `${p.id}#s0`, programId: p.id, groupId: p.group, taskId: `task-${p.group}`, callIds: [], segment: 0, tokenIds: [1], lossMask: [0], oldLogprobs: [0], versions: [-1], chunks: [-1] };
    p.chunks.forEach((len, k) => {
      if (k > 0) {
        s.tokenIds.push(2);
        s.lossMask.push(0);
        s.oldLogprobs.push(0);
        s.versions.push(-1);
        s.chunks.push(-1);
      }
      s.callIds.push(`${p.id}-c${k}`);
      for (let i = 0; i < len; i++) {
        s.tokenIds.push(100 + (pi % 3) * 10 + i);
        s.lossMask.push(1);
        s.oldLogprobs.push(-0.1 * (i + 1) - 0.01 * k);
        s.versions.push(3);
        s.chunks.push(k);
      }
    });
    if (p.chunks.length > 0) samples.push(s);
    const o: ProgramOutcome = { programId: p.id, groupId: p.group, reward: p.reward, chunkCount: p.chunks.length, chunkLengths: p.chunks.slice() };
    if (p.steps) o.stepRewards = p.steps.slice();
    if (p.outcome !== undefined) o.outcome = p.outcome;
    outcomes.push(o);
  });
  return { samples, programs: outcomes };
}
