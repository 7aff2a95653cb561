import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import type { Group } from "../core/types.js";
import { createEnvironment } from "../envs/registry.js";
import type { Task } from "../envs/env.js";
import { endedProgram, type ProgramRunner } from "../rollout/sync-rollout.js";
import { trainingTrajectories } from "../store/held-out-groups.js";
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
    expect(v2?.solved.mean).toBeCloseTo(0.5, 12);
    expect(v2?.diff?.mean).toBeCloseTo(0.25, 12);
    expect(v2?.diff?.se).toBeCloseTo(0.25, 12);
    expect(await ev.score(2)).toBe(v2);
    expect(seen).toHaveLength(16);
    expect(new Set(seen).size).toBe(16);
    expect(ev.scores.map((s) => s.version)).toEqual([0, 2]);
  });

  it("goes on from a resumed run's state: the base is not run again, a new version is paired with it", async () => {
    const solved = (taskIndex: number, sample: number, version: number): boolean => (sample === 0 && taskIndex < 2) || (version >= 2 && taskIndex === 2);
    const seen: number[] = [];
    const options = { tasks, samples: 2, every: 2, concurrency: 3, temperature: 0.7 };
    const run = async (_t: Task, taskIndex: number, sample: number, version: number): Promise<boolean> => {
      seen.push(version);
      return solved(taskIndex, sample, version);
    };
    const first = new HeldOutEvaluation({ ...options, run });
    expect(first.state()).toBeUndefined();
    await first.score(0);
    const v2 = await first.score(2);
    // The state as resume.json holds it, after a JSON round trip.
    const restore = JSON.parse(JSON.stringify(first.state())) as NonNullable<ReturnType<HeldOutEvaluation["state"]>>;
    seen.length = 0;
    const resumed = new HeldOutEvaluation({ ...options, run, restore });
    expect(resumed.baseScore).toEqual(first.scores[0]);
    expect(resumed.due(1, false)).toBe(false);
    expect(await resumed.score(0)).toEqual(first.scores[0]);
    expect(seen).toEqual([]);
    // Version 4 solves what version 2 did: the same difference from the restored base.
    const v4 = await resumed.score(4);
    expect(seen).toHaveLength(8);
    expect(v4?.baseVersion).toBe(0);
    expect(v4?.diff).toEqual({ ...v2?.diff });
    expect(resumed.scores.map((s) => s.version)).toEqual([0, 2, 4]);
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

  it("gives a version whose programs did not all end with an outcome no score, lists it as incomplete, and keeps the base for later versions", async () => {
    // Version 1 is stopped midway: only tasks 0 and 1 end with an outcome (both solved).
    const ev = new HeldOutEvaluation({
      tasks,
      samples: 1,
      every: 1,
      concurrency: 2,
      temperature: 1,
      run: async (_task, taskIndex, _sample, version) => (version === 1 && taskIndex >= 2 ? undefined : taskIndex === 0),
    });
    const v0 = await ev.score(0);
    expect(v0?.solved.mean).toBe(0.25);
    expect(await ev.score(1)).toBeUndefined();
    expect(ev.incomplete).toEqual([{ version: 1, ended: 2, total: 4 }]);
    // Never a solved rate over the tasks that ended: 2 of 2 solved would read as 1.0 (and 0.25 over all four).
    expect(ev.scores.map((s) => s.version)).toEqual([0]);
    const v2 = await ev.score(2);
    expect(v2?.baseVersion).toBe(0);
    expect(ev.scores.map((s) => s.version)).toEqual([0, 2]);
  });

  it("refuses bad sizes, naming the eval field", () => {
    const run = async (): Promise<boolean> => false;
    expect(() => new HeldOutEvaluation({ tasks: [], samples: 1, every: 1, concurrency: 1, temperature: 1, run })).toThrow(/eval\.tasks/);
    expect(() => new HeldOutEvaluation({ tasks, samples: 0, every: 1, concurrency: 1, temperature: 1, run })).toThrow(/eval\.samples: must be an integer >= 1/);
    expect(() => new HeldOutEvaluation({ tasks, samples: 1, every: 0.5, concurrency: 1, temperature: 1, run })).toThrow(/eval\.every/);
  });
});

describe("heldOutPrograms", () => {
  const env = createEnvironment("calc");
  const limits = { maxTurns: 1, maxTokensPerCall: 8, maxTotalTokens: 8 };
  // A stand-in for the gateway and agent: it creates and ends the program's row as the gateway would, and
  // answers right on sample 0 only; `aborted(programId)` ends that program as the run's abort would.
  const runner = (store: SqliteTrajectoryStore, clock: VirtualClock, runs: RunSeen[], aborted: (programId: string) => boolean = () => false): ProgramRunner => ({
    run: async (o, task, group, programId, sampleIndex) => {
      runs.push({ programId, runId: o.runId, group, taskId: task.id, sample: sampleIndex, temperature: o.temperature, seed: o.seed });
      await store.createProgram({ id: programId, runId: o.runId, taskId: task.id, groupId: group.id, sampleIndex, state: "active", createdAt: clock.now() });
      if (aborted(programId)) {
        const termination = { kind: "aborted" as const, detail: "run aborted" };
        await store.endProgram(programId, termination, clock.now());
        return endedProgram({ store, env }, task, group, programId, { termination, calls: 0, finalAnswer: "", zeroReward: false });
      }
      await store.endProgram(programId, { kind: "completed" }, clock.now());
      const answer = (task.meta as { answer: number }).answer + (sampleIndex === 0 ? 0 : 1);
      return endedProgram({ store, env }, task, group, programId, { termination: { kind: "completed" }, calls: 1, finalAnswer: `Answer: ${answer}`, check: await env.check(task, { finalAnswer: `Answer: ${answer}` }), zeroReward: false });
    },
  });

  it("runs each held-out sample as a program of the run's own store run, in held-out groups, with the same task and sample index at every version", async () => {
    const store = new SqliteTrajectoryStore(":memory:");
    const clock = new VirtualClock(10);
    const runs: RunSeen[] = [];
    let ready = 0;
    const run = heldOutPrograms({
      runId: "r",
      // The rollout creates the run (async-rollout.ts runReady); here the test does, once.
      runReady: async () => {
        if (ready++ === 0) await store.createRun({ id: "r", name: "r", configJson: "{}", startedAt: 0 });
      },
      programs: runner(store, clock, runs),
      options: { env, store, gatewayUrl: "http://unused", model: "m", limits, seed: 5, clock },
      temperature: 0.5,
      samples: 2,
      store,
      clock,
    });
    // A training group of the same run, as the rollout writes it.
    const ev = new HeldOutEvaluation({ tasks: tasks.slice(0, 2), samples: 2, every: 1, concurrency: 4, temperature: 0.5, run });
    const v0 = await ev.score(0);
    await store.createGroup({ id: "r/it1/g0", runId: "r", taskId: "t", programIds: [], iteration: 1 });
    const v1 = await ev.score(1);
    expect(v0?.solved.mean).toBe(0.5);
    expect(v1?.diff).toEqual({ mean: 0, se: 0, n: 2 });
    // Same task, sample index, seed and temperature at both versions (the program's sampling seed derives from them).
    const key = (r: RunSeen): string => `${r.taskId}/${r.sample}/${r.seed}/${r.temperature}`;
    const at = (v: number): string[] => runs.filter((r) => r.programId.startsWith(`r/eval-v${v}/`)).map(key).sort();
    expect(at(0)).toHaveLength(4);
    expect(at(1)).toEqual(at(0));
    expect(new Set(runs.map((r) => r.programId)).size).toBe(8);
    expect(runs.every((r) => r.runId === "r" && r.group.runId === "r")).toBe(true);
    // One store run: the held-out groups are in it, named like the training ones and marked with their version.
    expect((await store.listRuns()).map((x) => x.id)).toEqual(["r"]);
    // (Sorted: the version's programs start groups concurrently.)
    expect((await store.listGroups("r")).map((g) => [g.id, g.heldOutVersion, g.iteration]).sort()).toEqual([
      ["r/eval-v0/g0", 0, undefined],
      ["r/eval-v0/g1", 0, undefined],
      ["r/eval-v1/g0", 1, undefined],
      ["r/eval-v1/g1", 1, undefined],
      ["r/it1/g0", undefined, 1],
    ]);
    const stored = await store.listTrajectories("r");
    expect(stored).toHaveLength(8);
    expect(stored.map((t) => t.reward?.total).sort()).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    // Nothing of them is a training program of the run.
    expect(await trainingTrajectories(store, "r")).toEqual([]);
    await store.close();
  });

  it("reports a program the run's abort ended as without outcome (not unsolved), stores no reward for it, and the version gets no score", async () => {
    const store = new SqliteTrajectoryStore(":memory:");
    await store.createRun({ id: "r", name: "r", configJson: "{}", startedAt: 0 });
    const clock = new VirtualClock(10);
    const runs: RunSeen[] = [];
    const abort = new AbortController();
    // Version 1: task 1's programs are ended by the abort (sample 0 would have solved it).
    const run = heldOutPrograms({
      runId: "r",
      runReady: async () => undefined,
      programs: runner(store, clock, runs, (id) => id.startsWith("r/eval-v1/g1/")),
      options: { env, store, gatewayUrl: "http://unused", model: "m", limits, seed: 5, clock, signal: abort.signal },
      temperature: 0.5,
      samples: 2,
      store,
      clock,
    });
    const t = tasks.slice(0, 2);
    expect(await run(t[1] as Task, 1, 0, 0)).toBe(true);
    expect(await run(t[1] as Task, 1, 0, 1)).toBeUndefined();
    // Any failure while the run aborts says nothing about the policy either, even one that ended "completed".
    abort.abort();
    expect(await run(t[0] as Task, 0, 0, 1)).toBeUndefined();
    const rewards = Object.fromEntries((await store.listTrajectories("r")).map((x) => [x.program.id, x.reward?.total ?? null]));
    expect(rewards).toEqual({ "r/eval-v0/g1/s0": 1, "r/eval-v1/g1/s0": null, "r/eval-v1/g0/s0": null });
    const ev = new HeldOutEvaluation({ tasks: t, samples: 2, every: 1, concurrency: 4, temperature: 0.5, run });
    expect(await ev.score(2)).toBeUndefined();
    expect(ev.incomplete).toEqual([{ version: 2, ended: 0, total: 4 }]);
    expect(ev.scores).toEqual([]);
    await store.close();
  });
});

interface RunSeen {
  programId: string;
  runId: string;
  group: Group;
  taskId: string;
  sample: number;
  temperature: number;
  seed: number;
}
