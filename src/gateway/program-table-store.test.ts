// The program table as the one owner of a program's stored row: created and ended through it,
// its calls' writes tracked so the end is recorded last, and a failed write refusing later calls.
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { fixtureCall, fixtureRun } from "../testing/store-fixtures.js";
import { ProgramTable } from "./program-table.js";

async function storeWithRun(): Promise<SqliteTrajectoryStore> {
  const store = new SqliteTrajectoryStore(":memory:");
  await store.createRun(fixtureRun("run"));
  return store;
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (e) {
    return e instanceof ArborError ? e.code : "not-arbor";
  }
  return undefined;
}

describe("ProgramTable with a store", () => {
  it("creates the program's row (in a group of its own, or the one named) and refuses calls for ids it did not create", async () => {
    const store = await storeWithRun();
    await store.createGroup({ id: "g", runId: "run", taskId: "t", programIds: [] });
    const clock = new VirtualClock(50);
    const table = new ProgramTable({ clock, maxPrograms: 4, store, runId: "run" });
    await table.create("alone");
    await table.create("member", { groupId: "g", taskId: "t", sampleIndex: 3 });
    expect((await store.getTrajectory("alone"))?.program).toEqual({ id: "alone", runId: "run", taskId: "none", groupId: "alone", sampleIndex: 0, state: "active", createdAt: 50 });
    expect((await store.getTrajectory("member"))?.program).toMatchObject({ groupId: "g", taskId: "t", sampleIndex: 3 });
    // The table keeps a named group (speculative decoding's draft group); a group of its own is not one.
    expect(table.get("member")?.groupId).toBe("g");
    expect(table.get("alone")?.groupId).toBeUndefined();
    expect(await store.listGroups("run")).toEqual([
      { id: "g", runId: "run", taskId: "t", programIds: ["member"] },
      { id: "alone", runId: "run", taskId: "none", programIds: ["alone"] },
    ]);
    table.admit("ghost");
    expect(() => table.beginCall("ghost")).toThrow(expect.objectContaining({ code: "program_unknown" }));
    expect(await codeOf(table.create("alone"))).toBe("program_exists");
    await store.close();
  });

  it("keeps nothing when the store refuses the row, and names what is missing", async () => {
    const store = await storeWithRun();
    const table = new ProgramTable({ clock: new VirtualClock(), maxPrograms: 4, store });
    await expect(table.create("p")).rejects.toThrow("run_id: required, this gateway has no default run for its programs (create one with POST /runs)");
    await expect(table.create("p", { runId: "run", groupId: "g" })).rejects.toThrow("task_id: required with group_id (the group's task)");
    await expect(table.create("p", { runId: "nope" })).rejects.toThrow("program 'p' could not be created in the store: createGroup 'p': unknown run 'nope'");
    expect(table.get("p")).toBeUndefined();
    await table.create("p", { runId: "run" });
    expect(table.get("p")?.state).toBe("active");
    await store.close();
  });

  it("ends the row after the program's call in flight has been recorded, with the termination given", async () => {
    const store = await storeWithRun();
    const clock = new VirtualClock(10);
    const table = new ProgramTable({ clock, maxPrograms: 4, store, runId: "run" });
    await table.create("p");
    const index = table.beginCall("p");
    clock.advance(5);
    let ended = false;
    const end = table.end("p", { kind: "max_turns", detail: "3 turns" }).then(() => (ended = true));
    // Released at once (later calls refused), but the row waits for the call in flight.
    expect(() => table.beginCall("p")).toThrow(expect.objectContaining({ code: "program_released" }));
    await new Promise((r) => setImmediate(r));
    expect(ended).toBe(false);
    table.track("p", index, store.recordCall(fixtureCall("p", index, [-0.5])));
    table.endCall("p", 4);
    await end;
    const t = await store.getTrajectory("p");
    expect(t?.calls.map((c) => c.index)).toEqual([0]);
    expect(t?.program).toMatchObject({ state: "terminated", endedAt: 15, termination: { kind: "max_turns", detail: "3 turns" } });
    await store.close();
  });

  it("refuses a program's calls once one could not be recorded, and ends it as engine_error saying which", async () => {
    const store = await storeWithRun();
    const table = new ProgramTable({ clock: new VirtualClock(), maxPrograms: 4, store, runId: "run" });
    await table.create("p");
    const i = table.beginCall("p");
    table.track("p", i, store.recordCall({ ...fixtureCall("p", i, [-1]), logprobs: [] }));
    table.endCall("p", 2);
    await table.drain();
    expect(() => table.beginCall("p")).toThrow("program 'p': call 0 (call 'p-c0': 0 logprobs for 1 output tokens) was not recorded, so it accepts no more calls");
    await table.end("p", { kind: "completed" });
    expect((await store.getTrajectory("p"))?.program.termination).toEqual({
      kind: "engine_error",
      detail: "call 0 (call 'p-c0': 0 logprobs for 1 output tokens) was not recorded; ended as completed",
    });
    await store.close();
  });

  it("ends idle programs as timeout and, on endAll, active ones as the closing gateway says; a failed end is reported", async () => {
    const store = await storeWithRun();
    const clock = new VirtualClock(0);
    const errors: string[] = [];
    const table = new ProgramTable({ clock, maxPrograms: 4, store, runId: "run", idleReleaseMs: 100, onStoreError: (id, e) => errors.push(`${id}: ${e.message}`) });
    await table.create("idle");
    clock.advance(60);
    await table.create("busy");
    clock.advance(50);
    expect(table.releaseIdle()).toEqual(["idle"]);
    table.endAll({ kind: "aborted", detail: "gateway closed" });
    await table.drain();
    const [idle, busy] = await store.listTrajectories("run");
    expect(idle?.program.termination).toEqual({ kind: "timeout", detail: "no call for 100 ms: released by the gateway" });
    expect(busy?.program.termination).toEqual({ kind: "aborted", detail: "gateway closed" });
    expect(errors).toEqual([]);
    // A row someone else ended: the table's end is refused by the store and reported.
    await table.create("other");
    await store.endProgram("other", { kind: "completed" }, 1);
    table.release("other");
    await table.drain();
    expect(errors).toEqual(["other: endProgram: program 'other' already ended (completed)"]);
    await store.close();
  });

  it("without a store opens programs on their first call and refuses store placement", async () => {
    const table = new ProgramTable({ clock: new VirtualClock(), maxPrograms: 4 });
    table.admit("p");
    expect(table.beginCall("p")).toBe(0);
    await expect(table.create("q", { runId: "run" })).rejects.toThrow("run_id: this gateway has no store to place the program in; start it with a store");
    expect((await table.create("q")).state).toBe("active");
  });
});

describe("ProgramTable when the store refuses a program's end", () => {
  /** The store, whose next `refusals` endProgram writes fail as a full write queue fails them. */
  function refusing(store: SqliteTrajectoryStore, refusals: number): SqliteTrajectoryStore {
    let left = refusals;
    return new Proxy(store, {
      get(target, key, receiver) {
        if (key === "endProgram") {
          return (...args: Parameters<SqliteTrajectoryStore["endProgram"]>) => (left-- > 0 ? Promise.reject(new Error("endProgram: write queue is full")) : target.endProgram(...args));
        }
        const v: unknown = Reflect.get(target, key, receiver);
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  }

  it("writes the end again when it is asked again, with the program's own termination", async () => {
    const store = await storeWithRun();
    const errors: string[] = [];
    const table = new ProgramTable({ clock: new VirtualClock(5), maxPrograms: 4, store: refusing(store, 1), runId: "run", onStoreError: (id, e) => errors.push(`${id}: ${e.message}`) });
    await table.create("p");
    await expect(table.end("p", { kind: "completed" })).rejects.toThrow("write queue is full");
    expect(errors).toEqual(["p: endProgram: write queue is full"]);
    expect((await store.getTrajectory("p"))?.program.state).toBe("active");
    // The caller retries (a retried release): the end is written now, once.
    await table.end("p", { kind: "aborted", detail: "a retry's own termination is not the program's" });
    expect((await store.getTrajectory("p"))?.program).toMatchObject({ state: "terminated", termination: { kind: "completed" } });
  });

  it("writes a refused end again when the gateway closes (endAll), beside the active programs it ends", async () => {
    const store = await storeWithRun();
    const table = new ProgramTable({ clock: new VirtualClock(5), maxPrograms: 4, store: refusing(store, 1), runId: "run" });
    await table.create("refused");
    await table.create("open");
    await table.end("refused", { kind: "max_turns" }).catch(() => {});
    table.endAll({ kind: "aborted", detail: "gateway closed" });
    await table.drain();
    expect((await store.getTrajectory("refused"))?.program.termination).toEqual({ kind: "max_turns" });
    expect((await store.getTrajectory("open"))?.program.termination).toEqual({ kind: "aborted", detail: "gateway closed" });
  });
});
