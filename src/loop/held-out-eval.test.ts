import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { heldOutRunOf } from "../core/held-out-run.js";
import type { Group } from "../core/types.js";
import { createEnvironment } from "../envs/registry.js";
import type { Task } from "../envs/env.js";
import { endedProgram, type ProgramRunner } from "../rollout/sync-rollout.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { HeldOutEvaluation } from "./held-out-eval.js";
import { heldOutPrograms } from "./held-out-programs.js";

const tasks: Task[] = createEnvironment("calc").tasks(4, 3);

describe("HeldOutEvaluation", () => {
  it("scores every (task, sample) per version, pairs each version with the first, and runs a version once", async () => {
    const seen: string[] = [];
    // Version 0 solves tasks 0 and 1 on sample 0 only; version 2 also solves task 2 on both samples.
    const solved = (taskIndex: number, sample: number, version: number): boolean => (sample === 0 && taskIndex < 2) || (version === 2 && taskIndex === 2);
    const ev = new HeldOutEvaluation({
      tasks,
      samples: 2,
      every: 2,
      concurrency: 3,
      temperature: 0.7,
      run: async (task, taskIndex, sample, version) => {
        expect(task).toBe(tasks[taskIndex]);
        seen.push(`v${version}/t${taskIndex}/s${sample}`);
        return solved(taskIndex, sample, version);
      },
    });
    expect(ev.due(0, false)).toBe(true); // nothing scored yet: the first is the base
    const v0 = await ev.score(0);
    // Task fractions 0.5, 0.5, 0, 0: rate 0.25, SE = sd(0.5,0.5,0,0)/2 = √(1/12)/2
    expect(v0).toEqual({ version: 0, solved: { mean: 0.25, se: Math.sqrt(1 / 12) / 2, n: 4 }, baseVersion: 0, tasks: 4, samples: 2, temperature: 0.7 });
    expect([ev.due(1, false), ev.due(2, false), ev.due(3, true)]).toEqual([false, true, true]);
    const v2 = await ev.score(2);
    // Fractions 0.5, 0.5, 1, 0: rate 0.5; differences 0, 0, 1, 0: mean 0.25, Σd² = 0.75, variance 0.25, SE = √(0.25/4) = 0.25
    expect(v2.solved.mean).toBeCloseTo(0.5, 12);
    expect(v2.diff?.mean).toBeCloseTo(0.25, 12);
    expect(v2.diff?.se).toBeCloseTo(0.25, 12);
    expect(await ev.score(2)).toBe(v2);
    expect(seen).toHaveLength(16);
    expect(new Set(seen).size).toBe(16);
    expect(ev.scores.map((s) => s.version)).toEqual([0, 2]);
  });

  it("runs at most `concurrency` programs at once", async () => {
    let running = 0;
    let most = 0;
    const ev = new HeldOutEvaluation({
      tasks,
      samples: 3,
      every: 1,
      concurrency: 2,
      temperature: 1,
      run: async () => {
        running++;
        most = Math.max(most, running);
        await Promise.resolve();
        await Promise.resolve();
        running--;
        return false;
      },
    });
    await ev.score(0);
    expect(most).toBe(2);
  });

  it("refuses bad sizes, naming the eval field", () => {
    const run = async (): Promise<boolean> => false;
    expect(() => new HeldOutEvaluation({ tasks: [], samples: 1, every: 1, concurrency: 1, temperature: 1, run })).toThrow(/eval\.tasks/);
    expect(() => new HeldOutEvaluation({ tasks, samples: 0, every: 1, concurrency: 1, temperature: 1, run })).toThrow(/eval\.samples: must be an integer >= 1/);
    expect(() => new HeldOutEvaluation({ tasks, samples: 1, every: 0.5, concurrency: 1, temperature: 1, run })).toThrow(/eval\.every/);
  });
});

describe("heldOutPrograms", () => {
  it("runs each held-out sample as a program of its own store run, with the same task and sample index at every version", async () => {
    const store = new SqliteTrajectoryStore(":memory:");
    const clock = new VirtualClock(10);
    const env = createEnvironment("calc");
    const runs: { programId: string; runId: string; group: Group; taskId: string; sample: number; temperature: number; seed: number }[] = [];
    // A stand-in for the gateway and agent: it creates and ends the program's row as the gateway would, and
    // answers right on sample 0 only.
    const programs: ProgramRunner = {
      run: async (o, task, group, programId, sampleIndex) => {
        runs.push({ programId, runId: o.runId, group, taskId: task.id, sample: sampleIndex, temperature: o.temperature, seed: o.seed });
        await store.createProgram({ id: programId, runId: o.runId, taskId: task.id, groupId: group.id, sampleIndex, state: "active", createdAt: clock.now() });
        await store.endProgram(programId, { kind: "completed" }, clock.now());
        const answer = (task.meta as { answer: number }).answer + (sampleIndex === 0 ? 0 : 1);
        return endedProgram({ store, env }, task, group, programId, { termination: { kind: "completed" }, calls: 1, finalAnswer: `Answer: ${answer}`, check: await env.check(task, { finalAnswer: `Answer: ${answer}` }), zeroReward: false });
      },
    };
    const held = heldOutPrograms({
      runId: "r-eval",
      run: { name: "r", configJson: "{}", of: "r" },
      programs,
      options: { env, store, gatewayUrl: "http://unused", model: "m", limits: { maxTurns: 1, maxTokensPerCall: 8, maxTotalTokens: 8 }, seed: 5, clock },
      temperature: 0.5,
      samples: 2,
      store,
      clock,
    });
    const ev = new HeldOutEvaluation({ tasks: tasks.slice(0, 2), samples: 2, every: 1, concurrency: 4, temperature: 0.5, run: held.run });
    const v0 = await ev.score(0);
    const v1 = await ev.score(1);
    await held.close();
    expect(v0.solved.mean).toBe(0.5);
    expect(v1.diff).toEqual({ mean: 0, se: 0, n: 2 });
    // Same task, sample index, seed and temperature at both versions (the program's sampling seed derives from them).
    const key = (r: (typeof runs)[number]): string => `${r.taskId}/${r.sample}/${r.seed}/${r.temperature}`;
    const at = (v: number): string[] => runs.filter((r) => r.programId.startsWith(`r-eval/v${v}/`)).map(key).sort();
    expect(at(0)).toHaveLength(4);
    expect(at(1)).toEqual(at(0));
    expect(new Set(runs.map((r) => r.programId)).size).toBe(8);
    expect(runs.every((r) => r.runId === "r-eval" && r.group.runId === "r-eval")).toBe(true);
    // Stored under the evaluation's own run, with the outcome as reward, and the run finished.
    const stored = await store.listTrajectories("r-eval");
    expect(stored).toHaveLength(8);
    expect(stored.map((t) => t.reward?.total).sort()).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    expect((await store.listGroups("r-eval")).map((g) => g.id).sort()).toEqual(["r-eval/v0/t0", "r-eval/v0/t1", "r-eval/v1/t0", "r-eval/v1/t1"]);
    // Marked as the held-out run of "r" in its stored config (arbor export builds no batch from it).
    const run = (await store.listRuns()).find((x) => x.id === "r-eval");
    expect(run && heldOutRunOf(run.configJson)).toBe("r");
    expect(run?.endedAt).toBe(10);
    await store.close();
  });
});
