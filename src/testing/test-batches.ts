// Random agentic batches for the trainer's tests: groups of multi-call programs whose contexts grow call
// by call (prompt ‖ output ‖ tool output), whose siblings fork from each other at arbitrary depths, over a
// tiny vocabulary (so unrelated samples also collide into shared prefixes). They go through the real batch
// builder (src/batch), so the trainer is tested on exactly the trees it will be given.
import fc from "fast-check";
import { buildTrainingBatch } from "../batch/build-batch.js";
import type { TreeBatch } from "../batch/tree/tree-batch.js";
import type { SampleMode } from "../batch/trajectory-samples.js";
import type { Call, Group, Trajectory } from "../core/types.js";

/** Shape of one random program: how it forks from an earlier sibling and what its calls emit. */
interface ProgramSpec {
  /** Sibling to fork from (mod the number of earlier siblings) and the depth of the fork in its first output. */
  forkFrom: number;
  forkDepth: number;
  calls: { output: number[]; tool: number[]; logprobs: number[] }[];
  reward: number;
}

export interface BatchSpec {
  prompts: number[][];
  groups: ProgramSpec[][];
  estimator: string;
  mode: SampleMode;
}

/** Estimators the property runs; each names its own LossSpec (token, sequence and chunk ratios, clip and CISPO). */
export const TEST_ESTIMATORS = ["grpo", "dr-grpo", "dapo", "gspo", "cispo", "chunked-mdp", "reward-to-go"] as const;

/** Arbitrary batch specs over tokens 0..vocab−1. */
export function batchSpecArb(vocab: number): fc.Arbitrary<BatchSpec> {
  const tokens = (min: number, max: number) => fc.array(fc.integer({ min: 0, max: vocab - 1 }), { minLength: min, maxLength: max });
  const call = fc.integer({ min: 1, max: 6 }).chain((len) =>
    fc.record({
      output: tokens(len, len),
      tool: tokens(1, 3),
      // Behaviour logprobs near the policy's (≈ −log vocab) so that ratios straddle the clip range.
      logprobs: fc.array(fc.double({ min: -4.5, max: -1.5, noNaN: true }), { minLength: len, maxLength: len }),
    }),
  );
  const program = fc.record({
    forkFrom: fc.nat(7),
    forkDepth: fc.nat(7),
    calls: fc.array(call, { minLength: 1, maxLength: 3 }),
    reward: fc.oneof(fc.constant(0), fc.constant(1), fc.double({ min: -1, max: 2, noNaN: true })),
  });
  return fc.record({
    prompts: fc.array(tokens(1, 4), { minLength: 2, maxLength: 2 }),
    groups: fc.array(fc.array(program, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 2 }),
    estimator: fc.constantFrom(...TEST_ESTIMATORS),
    mode: fc.constantFrom<SampleMode>("merged", "per-call"),
  });
}

/** Trajectories and groups of a spec: sibling p's first output starts with a copy of a sibling's up to `forkDepth`. */
export function specTrajectories(spec: BatchSpec): { trajectories: Trajectory[]; groups: Group[] } {
  const trajectories: Trajectory[] = [];
  const groups: Group[] = [];
  spec.groups.forEach((programs, g) => {
    const groupId = `g${g}`;
    const group: Group = { id: groupId, runId: "test", taskId: `t${g}`, programIds: [] };
    const firstOutputs: number[][] = [];
    programs.forEach((p, s) => {
      const programId = `${groupId}-p${s}`;
      group.programIds.push(programId);
      let context = (spec.prompts[g % spec.prompts.length] as number[]).slice();
      const calls: Call[] = p.calls.map((c, k) => {
        let output = c.output.slice();
        let logprobs = c.logprobs.slice();
        if (k === 0 && firstOutputs.length > 0) {
          const from = firstOutputs[p.forkFrom % firstOutputs.length] as number[];
          const shared = from.slice(0, p.forkDepth % (from.length + 1));
          output = shared.concat(output);
          logprobs = shared.map((_, i) => -2 - i / 10).concat(logprobs);
        }
        if (k === 0) firstOutputs.push(output);
        const callOut: Call = {
          id: `${programId}-c${k}`,
          programId,
          index: k,
          messages: [],
          promptTokenIds: context,
          outputTokenIds: output,
          logprobs,
          outputText: "",
          finishReason: "stop",
          backend: "test",
          policyVersion: 0,
          timings: { start: k, end: k + 1 },
        };
        context = context.concat(output, c.tool);
        return callOut;
      });
      trajectories.push({
        program: { id: programId, runId: "test", taskId: group.taskId, groupId, sampleIndex: s, state: "terminated", createdAt: 0 },
        calls,
        tools: [],
        reward: { total: p.reward, components: { outcome: p.reward } },
      });
    });
    groups.push(group);
  });
  return { trajectories, groups };
}

/** The packed batch of a spec through the real batch builder; undefined when it has no loss terms. */
export function specBatch(spec: BatchSpec): TreeBatch | undefined {
  const { trajectories, groups } = specTrajectories(spec);
  const built = buildTrainingBatch({ id: "test", trajectories, groups, estimator: spec.estimator, mode: spec.mode });
  return built.tree.tree.terms.node.length === 0 ? undefined : built.tree;
}
