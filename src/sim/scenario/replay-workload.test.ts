import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Call } from "../../core/types.js";
import { SqliteTrajectoryStore } from "../../store/sqlite-store.js";
import { fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../../testing/store-fixtures.js";
import { loadReplayPrograms, parseReplayWorkload, replayScenarioFromDoc } from "./replay-workload.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-replay-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

/** A call of `programId` with the given tokens and timings. */
function call(programId: string, index: number, prompt: number[], output: number[], start: number, end: number): Call {
  return { ...fixtureCall(programId, index, output.map(() => -0.5)), promptTokenIds: prompt, outputTokenIds: output, timings: { start, end } };
}

/**
 * A store with one run of two programs: p0 grows its context over 3 calls, p1 resets it before its 2nd call;
 * and a held-out evaluation group of the same run, which is not part of its rollout.
 */
async function makeStore(path: string): Promise<void> {
  const store = new SqliteTrajectoryStore(path);
  const group = fixtureGroup("g", "run-1", 2);
  await store.createRun(fixtureRun());
  await store.createGroup(group);
  const [p0, p1] = group.programIds as [string, string];
  await store.createProgram(fixtureProgram(group, 0));
  await store.createProgram(fixtureProgram(group, 1));
  const sys = range(1000, 300);
  const a0 = [...sys, ...range(5000, 100)];
  const o0 = range(9000, 40);
  const a1 = [...a0, ...o0, ...range(6000, 250)];
  const o1 = range(9100, 60);
  const a2 = [...a1, ...o1, ...range(7000, 120)];
  await store.recordCall(call(p0, 0, a0, o0, 10_000, 10_800));
  await store.recordCall(call(p0, 1, a1, o1, 11_300, 12_000));
  await store.recordCall(call(p0, 2, a2, range(9200, 30), 14_000, 14_500));
  const b0 = [...sys, ...range(8000, 80)];
  await store.recordCall(call(p1, 0, b0, range(9300, 50), 10_200, 10_900));
  await store.recordCall(call(p1, 1, [...sys, ...range(8500, 40)], range(9400, 20), 12_900, 13_100));
  await store.endProgram(p0, { kind: "completed" }, 14_600);
  await store.endProgram(p1, { kind: "completed" }, 13_200);
  const heldOut = { ...fixtureGroup("run-1/eval-v0/g0", "run-1", 1), heldOutVersion: 0 };
  await store.createGroup(heldOut);
  await store.createProgram(fixtureProgram(heldOut, 0));
  await store.recordCall(call(heldOut.programIds[0] as string, 0, range(1000, 50), range(9500, 10), 10_100, 10_300));
  await store.endProgram(heldOut.programIds[0] as string, { kind: "completed" }, 10_400);
  await store.close();
}

describe("replay of a stored Arbor run", () => {
  it("turns the run's calls into programs: token counts, tool gaps, context resets (held-out evaluation left out)", async () => {
    const path = join(dir, "a.sqlite");
    await makeStore(path);
    const programs = await loadReplayPrograms({ store: path, runId: "run-1" });
    expect(programs.map((p) => [p.programId, p.arrivalMs])).toEqual([
      ["g-p0", 0],
      ["g-p1", 200],
    ]);
    const [p0, p1] = programs as [(typeof programs)[0], (typeof programs)[0]];
    expect(p0.promptTokenIds).toHaveLength(400);
    expect(p0.turns.map((t) => [t.outputLength, t.toolTokens.length, t.toolMs, t.resetPromptTokenIds?.length])).toEqual([
      [40, 250, 500, undefined],
      [60, 120, 2000, undefined],
      [30, 0, 0, undefined],
    ]);
    expect(p1.turns.map((t) => [t.outputLength, t.toolMs, t.resetPromptTokenIds?.length])).toEqual([
      [50, 2000, 340],
      [20, 0, undefined],
    ]);
    await expect(loadReplayPrograms({ store: path, runId: "nope" })).rejects.toThrow("replay: run 'nope' is not in the store");
    // A mistyped store path is said as such, and no empty store is left there.
    const missing = join(dir, "missing.sqlite");
    await expect(loadReplayPrograms({ store: missing, runId: "run-1" })).rejects.toThrow(`replay: store ${missing}: no such file`);
    expect(existsSync(missing)).toBe(false);
  });

  it("runs the replayed programs for every agent system, every call completed", async () => {
    const path = join(dir, "b.sqlite");
    await makeStore(path);
    const sc = replayScenarioFromDoc({ kind: "replay", name: "mine", store: "b.sqlite", runId: "run-1", cluster: { engines: 2, kvTokensPerEngine: 4096 } }, join(dir, "mine.yaml"));
    expect(sc.info.kind).toBe("replay");
    for (const system of sc.systems) {
      const r = await sc.run(system, { seed: 1, scale: 1 });
      expect(r.summary).toMatchObject({ requests: 5, completed: 5, aborted: 0, programs: 2 });
      // p0's last call cannot start before its recorded gaps: 500 + 2000 ms of tools.
      expect(r.summary.makespanMs).toBeGreaterThan(2500);
      expect(r.summary.outputTokens).toBe(40 + 60 + 30 + 50 + 20);
    }
    // The scale a report states: the run's programs, counted from the store; half of them on one engine at 0.5.
    expect(await sc.scaleAt(1)).toMatchObject({ programs: 2, engines: 2, runId: "run-1" });
    expect(await sc.scaleAt(0.5)).toMatchObject({ programs: 1, engines: 1 });
    expect((await sc.run("verl-like", { seed: 1, scale: 0.5 })).summary.programs).toBe(1);
  }, 60_000);

  it("replays a sync run's iterations one after another: each as it began, without the training steps between them", async () => {
    const path = join(dir, "c.sqlite");
    const store = new SqliteTrajectoryStore(path);
    await store.createRun(fixtureRun("run-2"));
    const sys = range(1000, 300);
    // Iteration 1: one program, 3 s of tools. Iteration 2 began 60 s later (the training step): two programs, 2 s.
    const rounds: [number, number, number][] = [
      [1, 0, 10_000],
      [2, 0, 70_000],
      [2, 1, 70_500],
    ];
    for (const [iteration, k, start] of rounds) {
      const g = { ...fixtureGroup(`it${iteration}-${k}`, "run-2", 1), iteration };
      await store.createGroup(g);
      await store.createProgram(fixtureProgram(g, 0));
      const p = g.programIds[0] as string;
      const a0 = [...sys, ...range(5000 + 100 * k + 1000 * iteration, 50)];
      const o0 = range(9000, 20);
      const tool = iteration === 1 ? 3000 : 2000;
      await store.recordCall(call(p, 0, a0, o0, start, start + 100));
      await store.recordCall(call(p, 1, [...a0, ...o0, ...range(6000, 30)], range(9100, 10), start + 100 + tool, start + 200 + tool));
      await store.endProgram(p, { kind: "completed" }, start + 300 + tool);
    }
    await store.close();
    const programs = await loadReplayPrograms({ store: path, runId: "run-2" });
    expect(programs.map((p) => [p.programId, p.wave, p.arrivalMs])).toEqual([
      ["it1-0-p0", undefined, 0],
      ["it2-0-p0", 1, 0],
      ["it2-1-p0", 1, 500],
    ]);
    const sc = replayScenarioFromDoc({ kind: "replay", name: "sync", store: "c.sqlite", runId: "run-2", cluster: { engines: 2, kvTokensPerEngine: 4096 } }, join(dir, "sync.yaml"));
    for (const system of sc.systems) {
      const r = await sc.run(system, { seed: 1, scale: 1 });
      expect(r.summary).toMatchObject({ requests: 6, completed: 6, programs: 3 });
      // Iteration 2 starts when iteration 1 ended (after its 3 s of tools): its programs' 0.5 s + 2 s come after.
      expect(r.summary.makespanMs).toBeGreaterThan(3000 + 500 + 2000);
      // The 60 s between the iterations (the run's training step) is not replayed.
      expect(r.summary.makespanMs).toBeLessThan(10_000);
    }
  }, 60_000);

  it("names the file and field of a bad replay document", () => {
    expect(() => parseReplayWorkload({ kind: "replay", name: "x", store: "s.sqlite", cluster: { engines: 1 } }, "r.yaml")).toThrow(/^r\.yaml: runId: /);
  });
});
