// A synthetic SWE-agent-like batch for `arbor bench tree` and tests: per task, G programs (default 8) share a
// system prompt and the task statement; each runs several turns whose prompts extend the previous
// prompt ‖ output ‖ tool output (growing contexts), with occasional context resets (history replaced by a
// short summary). Produced as real Trajectories and Groups, so it flows through the same batch pipeline.
//
// Assumptions (stated because the tree's savings follow from them):
// - the agent keeps its whole history (no observation elision such as SWE-agent's "last N observations"
//   processor, which rewrites old tool results and so breaks the prefix between calls);
// - siblings of a group share the system prompt and the task; beyond that they share a turn only while
//   their actions coincide: at each turn a sibling still on the group's common path repeats that path's
//   action with probability `coincideProbability` (common opening moves: list the repo, open the file the
//   issue names), and then sees the same tool result (the environment is deterministic); once it departs
//   it never rejoins (its later contexts differ). Default 0: every sibling departs at its first turn;
// - token ids are random apart from that structure, so no two branches share tokens by chance.
import { ArborError } from "../../core/errors.js";
import { Rng } from "../../core/rng.js";
import type { Call, Group, Trajectory } from "../../core/types.js";

/** Shape of the synthetic workload; every range is inclusive. */
export interface SyntheticOptions {
  seed: number;
  tasks?: number;
  groupSize?: number;
  turns?: [number, number];
  systemTokens?: number;
  taskTokens?: [number, number];
  outputTokens?: [number, number];
  toolTokens?: [number, number];
  /** Probability that a turn after the first starts from a reset context (system ‖ task ‖ summary). */
  resetProbability?: number;
  summaryTokens?: number;
  /**
   * Probability that a sibling still on its group's common path takes the path's action at the next turn
   * (and so gets the same tool result); 0 (default) = siblings diverge at their first output.
   */
  coincideProbability?: number;
  vocab?: number;
}

/** The generated batch. */
export interface SyntheticBatch {
  trajectories: Trajectory[];
  groups: Group[];
}

function range(rng: Rng, [lo, hi]: [number, number]): number {
  return rng.int(lo, hi);
}

/** Generate a synthetic agentic batch (deterministic in `seed`). Throws an {@link ArborError} on bad ranges. */
export function syntheticSweBatch(opts: SyntheticOptions): SyntheticBatch {
  const o = {
    tasks: 2,
    groupSize: 8,
    turns: [4, 10] as [number, number],
    systemTokens: 600,
    taskTokens: [200, 800] as [number, number],
    outputTokens: [20, 200] as [number, number],
    toolTokens: [50, 600] as [number, number],
    resetProbability: 0,
    summaryTokens: 64,
    coincideProbability: 0,
    vocab: 32_000,
    ...opts,
  };
  for (const k of ["turns", "taskTokens", "outputTokens", "toolTokens"] as const) {
    const [lo, hi] = o[k];
    if (!Number.isInteger(lo) || !Number.isInteger(hi) || lo < 1 || hi < lo) throw new ArborError(`synthetic: ${k} must be integers 1 <= lo <= hi, got [${lo}, ${hi}]`, "config");
  }
  if (o.groupSize < 1 || o.tasks < 1) throw new ArborError("synthetic: tasks and groupSize must be >= 1", "config");
  if (!(o.coincideProbability >= 0 && o.coincideProbability <= 1)) throw new ArborError(`synthetic: coincideProbability must be in [0, 1], got ${o.coincideProbability}`, "config");
  if (o.vocab <= o.groupSize + 1) throw new ArborError(`synthetic: vocab must exceed groupSize + 1, got ${o.vocab}`, "config");
  const rng = new Rng(o.seed);
  // Token 0..groupSize are reserved: the first output token of the turn where a program leaves its group's
  // common path is 1 + its sample index, so it forks exactly there (the tree layout is then predictable).
  const tok = (n: number): number[] => Array.from({ length: n }, () => rng.int(o.groupSize + 1, o.vocab - 1));
  const system = tok(o.systemTokens);
  const trajectories: Trajectory[] = [];
  const groups: Group[] = [];
  for (let t = 0; t < o.tasks; t++) {
    const taskId = `swe-task-${t}`;
    const groupId = `swe-g${t}`;
    const task = tok(range(rng, o.taskTokens));
    const group: Group = { id: groupId, runId: "synthetic", taskId, programIds: [] };
    // The group's common path, drawn lazily: turn k's action (output) and the tool result it gets.
    const common: { output: number[]; tool: number[] }[] = [];
    for (let s = 0; s < o.groupSize; s++) {
      const programId = `${groupId}-p${s}`;
      group.programIds.push(programId);
      const turns = range(rng, o.turns);
      const calls: Call[] = [];
      let context = system.concat(task);
      // No rng draw when coinciding is off, so batches of the default shape stay what they were.
      let onPath = o.coincideProbability > 0;
      for (let k = 0; k < turns; k++) {
        let contextReset: true | undefined;
        if (k > 0 && rng.float() < o.resetProbability) {
          context = system.concat(task, tok(o.summaryTokens));
          contextReset = true;
          onPath = false;
        }
        const wasOnPath = k === 0 || onPath;
        onPath &&= rng.float() < o.coincideProbability;
        let output: number[];
        let tool: number[] | undefined;
        if (onPath) {
          if (common.length === k) common.push({ output: tok(range(rng, o.outputTokens)), tool: tok(range(rng, o.toolTokens)) });
          const step = common[k] as { output: number[]; tool: number[] };
          output = step.output.slice();
          tool = step.tool;
        } else {
          output = tok(range(rng, o.outputTokens));
          // The turn where the program leaves the common path (or its first turn) forks on a token of its own.
          if (wasOnPath && !contextReset) output[0] = 1 + s;
        }
        const call: Call = {
          id: `${programId}-c${k}`,
          programId,
          index: k,
          messages: [],
          promptTokenIds: context,
          outputTokenIds: output,
          logprobs: output.map(() => -rng.float() * 3),
          outputText: "",
          finishReason: "stop",
          backend: "synthetic",
          policyVersion: 0,
          timings: { start: k, end: k + 1 },
        };
        if (contextReset) call.contextReset = true;
        calls.push(call);
        context = context.concat(output, tool ?? tok(range(rng, o.toolTokens)));
      }
      const reward = rng.float() < 0.5 ? 1 : 0;
      trajectories.push({
        program: { id: programId, runId: "synthetic", taskId, groupId, sampleIndex: s, state: "terminated", createdAt: 0, termination: { kind: "completed" } },
        calls,
        tools: [],
        reward: { total: reward, components: { outcome: reward } },
      });
    }
    groups.push(group);
  }
  return { trajectories, groups };
}
