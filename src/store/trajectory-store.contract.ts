// The shared contract suite every TrajectoryStore implementation must pass (call it from the
// implementation's test file with a harness that opens stores over one fresh backing location).
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ArborError } from "../core/errors.js";
import type { Call, Trajectory } from "../core/types.js";
import { conversation, fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import { TERMINATION_KINDS, type TrajectoryStore } from "./trajectory-store.js";

export interface StoreHarness {
  /** Open a store over this harness's backing data (every call sees the same data once the previous store is closed). */
  open(): TrajectoryStore | Promise<TrajectoryStore>;
  /** Remove the backing data (a networked store's may take a round trip). */
  dispose(): void | Promise<void>;
}

/** Values chosen to catch any rounding through text or float32. */
export const TRICKY_LOGPROBS = [-1e-12, -23.5, 0, -0, -Number.MIN_VALUE, -0.1, -1 / 3, -Infinity, -1.7976931348623157e308];

function expectBitExact(a: number[], b: number[]): void {
  expect(a.length).toBe(b.length);
  const ba = Buffer.from(new Float64Array(a).buffer);
  const bb = Buffer.from(new Float64Array(b).buffer);
  expect(ba.equals(bb)).toBe(true);
}

/** Register the contract tests for one implementation. `persistent`: data survives close + reopen. */
export function describeTrajectoryStoreContract(
  name: string,
  makeHarness: () => StoreHarness,
  opts: { persistent: boolean },
): void {
  describe(`TrajectoryStore contract: ${name}`, () => {
    let harness: StoreHarness;
    let store: TrajectoryStore;

    beforeEach(async () => {
      harness = makeHarness();
      store = await harness.open();
    });
    afterEach(async () => {
      await store.close();
      await harness.dispose();
    });

    /** A run with group g1 (2 programs) and g2 (1 program); p0 of g1 has 3 calls recorded out of order. */
    async function populate(): Promise<void> {
      await store.createRun(fixtureRun());
      const g1 = fixtureGroup("g1");
      const g2 = fixtureGroup("g2", "run-1", 1);
      await store.createGroup(g1);
      await store.createGroup(g2);
      await store.createProgram(fixtureProgram(g1, 0));
      await store.createProgram(fixtureProgram(g1, 1));
      await store.createProgram(fixtureProgram(g2, 0));
      await store.recordCall(fixtureCall("g1-p0", 2, [-0.5]));
      await store.recordCall(fixtureCall("g1-p0", 0, TRICKY_LOGPROBS));
      await store.recordTool({ programId: "g1-p0", callIndex: 0, tool: "calc", input: "6*7", output: "42", ok: true, durationMs: 3 });
      await store.recordCall(fixtureCall("g1-p0", 1, [-2, -3], 0));
      await store.recordTool({ programId: "g1-p0", callIndex: 1, tool: "calc", input: "x", output: "err", ok: false, durationMs: 1.5 });
      await store.recordCall(fixtureCall("g1-p1", 0, [-1e-12, -23.5]));
      await store.endProgram("g1-p0", { kind: "completed" }, 3000);
      await store.endProgram("g1-p1", { kind: "max_turns", detail: "4 turns" }, 3001);
      await store.setReward("g1-p0", { total: 1, components: { outcome: 1, format: -1e-12 } });
      await store.setReward("g1-p1", { total: 0, components: { outcome: 0 } });
    }

    it("returns calls ordered by index, tools in record order, and the reward", async () => {
      await populate();
      const t = await store.getTrajectory("g1-p0");
      expect(t).toBeDefined();
      const tr = t as Trajectory;
      expect(tr.calls.map((c) => c.index)).toEqual([0, 1, 2]);
      expect(tr.calls[0]).toEqual(fixtureCall("g1-p0", 0, TRICKY_LOGPROBS));
      expectBitExact(tr.calls[0]?.logprobs ?? [], TRICKY_LOGPROBS);
      expect(tr.calls[1]?.promptTokenIds).toEqual([]);
      expect(tr.tools.map((x) => [x.callIndex, x.ok])).toEqual([
        [0, true],
        [1, false],
      ]);
      expect(tr.program).toMatchObject({ state: "terminated", endedAt: 3000, termination: { kind: "completed" } });
      expect(tr.program.termination).toEqual({ kind: "completed" });
      expect(tr.reward).toEqual({ total: 1, components: { outcome: 1, format: -1e-12 } });
    });

    it("reads back a program whose calls resend the conversation, across a context reset and calls recorded without waiting", async () => {
      const g = fixtureGroup("g1", "run-1", 1);
      await store.createRun(fixtureRun());
      await store.createGroup(g);
      await store.createProgram(fixtureProgram(g, 0));
      const calls = conversation("g1-p0");
      await store.recordCall(calls[0] as Call);
      await store.recordCall(calls[1] as Call);
      await store.recordCall(calls[2] as Call);
      await Promise.all([store.recordCall(calls[3] as Call), store.recordCall(calls[4] as Call)]);
      const expectAsRecorded = (t: Trajectory | undefined): void => {
        expect(t?.calls).toEqual(calls);
        // Each call's messages are its own: changing one call's does not change another's.
        expect(t?.calls[1]?.messages[0]).not.toBe(t?.calls[0]?.messages[0]);
      };
      expectAsRecorded(await store.getTrajectory("g1-p0"));
      expectAsRecorded((await store.listTrajectories("run-1"))[0]);
      expect((await store.stats("run-1")).promptTokens).toBe(calls.reduce((n, c) => n + c.promptTokenIds.length, 0));
      if (opts.persistent) {
        await store.close();
        store = await harness.open();
        expectAsRecorded(await store.getTrajectory("g1-p0"));
      }
    });

    it("keeps any text exactly: NUL characters (a sampled <0x00> byte), a leading U+E000, non-BMP characters", async () => {
      await store.createRun(fixtureRun());
      const g = fixtureGroup("g1", "run-1", 1);
      await store.createGroup(g);
      await store.createProgram(fixtureProgram(g, 0));
      const texts = ["a\u0000b", "\uE000{\"x\"}", "\u0000", "😀 \uE000"];
      const calls = texts.map((outputText, i) => ({ ...fixtureCall("g1-p0", i, [-1]), outputText }));
      for (const c of calls) await store.recordCall(c);
      await store.recordTool({ programId: "g1-p0", callIndex: 0, tool: "calc", input: texts[0]!, output: texts[1]!, ok: true, durationMs: 1 });
      await store.recordContextEvent({ programId: "g1-p0", callIndex: 1, policy: "p", action: "discard", tokensBefore: 2, tokensAfter: 1, messagesBefore: 2, messagesAfter: 1, detail: texts[2]! });
      await store.endProgram("g1-p0", { kind: "engine_error", detail: texts[3]! }, 10);
      const t = (await store.getTrajectory("g1-p0")) as Trajectory;
      expect(t.calls.map((c) => c.outputText)).toEqual(texts);
      expect(t.tools.map((x) => [x.input, x.output])).toEqual([[texts[0], texts[1]]]);
      expect(t.contextEvents?.map((e) => e.detail)).toEqual([texts[2]]);
      expect(t.program.termination).toEqual({ kind: "engine_error", detail: texts[3] });
    });

    it("keeps a call's context reset and its reason, and refuses a reason without a reset", async () => {
      await store.createRun(fixtureRun());
      const g = fixtureGroup("g1", "run-1", 1);
      await store.createGroup(g);
      await store.createProgram(fixtureProgram(g, 0));
      const first = fixtureCall("g1-p0", 0, [-0.5]);
      const reset = { ...fixtureCall("g1-p0", 1, [-1]), contextReset: true as const, contextResetReason: "history differs" };
      await store.recordCall(first);
      await store.recordCall(reset);
      await expect(store.recordCall({ ...fixtureCall("g1-p0", 2, [-1]), contextResetReason: "tools changed" })).rejects.toThrow(
        /call 'g1-p0-c2': contextResetReason without contextReset/,
      );
      const calls = (await store.getTrajectory("g1-p0"))?.calls;
      expect(calls).toEqual([first, reset]);
      expect("contextResetReason" in (calls?.[0] as object)).toBe(false);
    });

    it("keeps the model name the client asked for and a clamped max_tokens, and refuses malformed ones naming the field", async () => {
      await store.createRun(fixtureRun());
      const g = fixtureGroup("g1", "run-1", 1);
      await store.createGroup(g);
      await store.createProgram(fixtureProgram(g, 0));
      const plain = fixtureCall("g1-p0", 0, [-0.5]);
      const asked = { ...fixtureCall("g1-p0", 1, [-1]), servedModel: "calc-policy", requestedModel: "claude-sonnet-4-5", maxTokensClamped: { asked: 64000, granted: 1900 } };
      await store.recordCall(plain);
      await store.recordCall(asked);
      await expect(store.recordCall({ ...fixtureCall("g1-p0", 2, [-1]), requestedModel: "" })).rejects.toThrow(/call 'g1-p0-c2' requestedModel: must be a non-empty string/);
      await expect(store.recordCall({ ...fixtureCall("g1-p0", 2, [-1]), maxTokensClamped: { asked: 10, granted: 10 } })).rejects.toThrow(
        /call 'g1-p0-c2' maxTokensClamped: must be \{asked, granted\}/,
      );
      const calls = (await store.getTrajectory("g1-p0"))?.calls;
      expect(calls).toEqual([plain, asked]);
      expect("requestedModel" in (calls?.[0] as object)).toBe(false);
      expect("maxTokensClamped" in (calls?.[0] as object)).toBe(false);
    });

    it("keeps a program with no calls, and groups in creation order with their members", async () => {
      await populate();
      const t = await store.getTrajectory("g2-p0");
      expect(t).toEqual({ program: fixtureProgram(fixtureGroup("g2", "run-1", 1), 0), calls: [], tools: [] });
      expect(await store.getTrajectory("nope")).toBeUndefined();
      const all = await store.listTrajectories("run-1");
      expect(all.map((x) => x.program.id)).toEqual(["g1-p0", "g1-p1", "g2-p0"]);
      expect(all[0]?.calls.map((c) => c.index)).toEqual([0, 1, 2]);
      expect(all[0]).toEqual(await store.getTrajectory("g1-p0"));
      expect(await store.listGroups("run-1")).toEqual([fixtureGroup("g1"), fixtureGroup("g2", "run-1", 1)]);
    });

    it("appends a program to a group created without members", async () => {
      await store.createRun(fixtureRun());
      await store.createGroup({ id: "g", runId: "run-1", taskId: "t", programIds: [] });
      await store.createProgram({ id: "a", runId: "run-1", taskId: "t", groupId: "g", sampleIndex: 0, state: "active", createdAt: 1 });
      expect(await store.listGroups("run-1")).toEqual([{ id: "g", runId: "run-1", taskId: "t", programIds: ["a"] }]);
    });

    it("keeps the iteration of the run each group was rolled out in, and refuses one that is not an integer >= 1", async () => {
      await store.createRun(fixtureRun());
      await store.createGroup({ id: "it1/g0", runId: "run-1", taskId: "t", programIds: [], iteration: 1 });
      await store.createGroup({ id: "it2/g0", runId: "run-1", taskId: "t", programIds: [], iteration: 2 });
      await store.createGroup({ id: "g", runId: "run-1", taskId: "t", programIds: [] });
      expect((await store.listGroups("run-1")).map((g) => [g.id, g.iteration])).toEqual([
        ["it1/g0", 1],
        ["it2/g0", 2],
        ["g", undefined],
      ]);
      expect(Object.keys((await store.listGroups("run-1"))[2] ?? {})).not.toContain("iteration");
      await expect(store.createGroup({ id: "bad", runId: "run-1", taskId: "t", programIds: [], iteration: 0 })).rejects.toThrow("group.iteration: must be an integer >= 1, got 0");
    });

    it("keeps the policy version a held-out evaluation group scored (absent on training groups), and refuses one that is not an integer >= 0", async () => {
      await store.createRun(fixtureRun());
      await store.createGroup({ id: "it1/g0", runId: "run-1", taskId: "t", programIds: [], iteration: 1 });
      await store.createGroup({ id: "eval-v0/g0", runId: "run-1", taskId: "t", programIds: [], heldOutVersion: 0 });
      await store.createGroup({ id: "eval-v3/g0", runId: "run-1", taskId: "t", programIds: [], heldOutVersion: 3 });
      expect((await store.listGroups("run-1")).map((g) => [g.id, g.heldOutVersion])).toEqual([
        ["it1/g0", undefined],
        ["eval-v0/g0", 0],
        ["eval-v3/g0", 3],
      ]);
      expect(Object.keys((await store.listGroups("run-1"))[0] ?? {})).not.toContain("heldOutVersion");
      await expect(store.createGroup({ id: "bad", runId: "run-1", taskId: "t", programIds: [], heldOutVersion: -1 })).rejects.toThrow("group.heldOutVersion: must be an integer >= 0, got -1");
    });

    it("keeps the resume that rolled a group out (absent for the run's first process), and refuses one that is not an integer >= 1", async () => {
      await store.createRun(fixtureRun());
      await store.createGroup({ id: "it3/g0", runId: "run-1", taskId: "t", programIds: [], iteration: 3 });
      await store.createGroup({ id: "it3-r1/g0", runId: "run-1", taskId: "t", programIds: [], iteration: 3, attempt: 1 });
      await store.createGroup({ id: "eval-v3-r2/g0", runId: "run-1", taskId: "t", programIds: [], heldOutVersion: 3, attempt: 2 });
      expect((await store.listGroups("run-1")).map((g) => [g.id, g.attempt])).toEqual([
        ["it3/g0", undefined],
        ["it3-r1/g0", 1],
        ["eval-v3-r2/g0", 2],
      ]);
      expect(Object.keys((await store.listGroups("run-1"))[0] ?? {})).not.toContain("attempt");
      await expect(store.createGroup({ id: "bad", runId: "run-1", taskId: "t", programIds: [], attempt: 0 })).rejects.toThrow("group.attempt: must be an integer >= 1, got 0");
    });

    it("reopens a finished run for more groups (resume); an unknown run is refused, one this process holds open is left open", async () => {
      await store.createRun(fixtureRun());
      await store.createGroup({ id: "it1/g0", runId: "run-1", taskId: "t", programIds: [], iteration: 1 });
      await expect(store.reopenRun("nope")).rejects.toThrow("reopenRun: unknown run 'nope'");
      await store.reopenRun("run-1");
      expect((await store.getRun("run-1"))?.endedAt).toBeUndefined();
      await store.finishRun("run-1", 50);
      expect((await store.getRun("run-1"))?.endedAt).toBe(50);
      await store.reopenRun("run-1");
      expect((await store.getRun("run-1"))?.endedAt).toBeUndefined();
      await store.createGroup({ id: "it2/g0", runId: "run-1", taskId: "t", programIds: [], iteration: 2 });
      await store.finishRun("run-1", 90);
      expect((await store.getRun("run-1"))?.endedAt).toBe(90);
      expect((await store.listGroups("run-1")).map((g) => g.iteration)).toEqual([1, 2]);
    });

    it("computes stats", async () => {
      await populate();
      const s = await store.stats("run-1");
      expect(s.programs).toBe(3);
      expect(s.unfinished).toBe(1);
      expect(s.calls).toBe(4);
      expect(s.promptTokens).toBe(3 + 0 + 3 + 3);
      expect(s.outputTokens).toBe(TRICKY_LOGPROBS.length + 2 + 1 + 2);
      expect(s.terminations.completed).toBe(1);
      expect(s.terminations.max_turns).toBe(1);
      expect(s.terminations.timeout).toBe(0);
      expect(Object.keys(s.terminations)).toHaveLength(TERMINATION_KINDS.length);
      expect(TERMINATION_KINDS).toEqual(expect.arrayContaining(["sandbox_oom", "hygiene_violation"]));
      expect(s.rewarded).toBe(2);
      expect(s.meanReward).toBe(0.5);
    });

    it("lists a run's programs not ended yet with their recorded calls, in creation order", async () => {
      await populate();
      await store.recordCall(fixtureCall("g2-p0", 0, [-1]));
      await store.recordCall(fixtureCall("g2-p0", 1, [-1], 0));
      expect(await store.activePrograms("run-1")).toEqual([{ id: "g2-p0", calls: 2 }]);
      await store.createRun(fixtureRun("empty"));
      expect(await store.activePrograms("empty")).toEqual([]);
      await expect(store.activePrograms("no-run")).rejects.toThrow(/unknown run/);
    });

    it("reports no mean reward for a run without rewards", async () => {
      await store.createRun(fixtureRun("empty"));
      expect(await store.stats("empty")).toMatchObject({ programs: 0, calls: 0, promptTokens: 0, rewarded: 0, meanReward: null });
    });

    it("throws for unknown ids and broken lifecycle steps, never silently", async () => {
      await populate();
      const err = async (fn: () => Promise<unknown>, re: RegExp): Promise<void> => {
        const p = fn();
        await expect(p).rejects.toThrow(ArborError);
        await expect(p).rejects.toThrow(re);
      };
      await err(() => store.recordCall(fixtureCall("ghost", 0, [-1])), /unknown program 'ghost'/);
      await err(() => store.recordCall(fixtureCall("g1-p0", 0, [-1])), /already ended/);
      await err(() => store.recordCall({ ...fixtureCall("g2-p0", 0, [-1]), id: "g1-p0-c0" }), /duplicate call id/);
      await store.recordCall(fixtureCall("g2-p0", 0, [-1]));
      await err(() => store.recordCall({ ...fixtureCall("g2-p0", 0, [-1]), id: "other" }), /already has a call at index 0/);
      await err(() => store.recordCall({ ...fixtureCall("g2-p0", 1, [-1]), logprobs: [] }), /0 logprobs for 1 output tokens/);
      await err(() => store.recordCall({ ...fixtureCall("g2-p0", 1, [-1]), outputTokenIds: [1.5] }), /outputTokenIds\[0\]/);
      await err(() => store.recordCall(fixtureCall("g2-p0", 1, [NaN])), /logprobs\[0\]/);
      const ghostTool = { programId: "ghost", callIndex: 0, tool: "t", input: "", output: "", ok: true, durationMs: 0 };
      await err(() => store.recordTool(ghostTool), /unknown program/);
      await err(() => store.endProgram("ghost", { kind: "completed" }, 1), /unknown program 'ghost'/);
      await err(() => store.endProgram("g1-p0", { kind: "timeout" }, 1), /already ended \(completed\)/);
      await err(() => store.setReward("ghost", { total: 0, components: {} }), /unknown program/);
      await err(() => store.setReward("g2-p0", { total: 0, components: {} }), /has not ended/);
      await err(() => store.setReward("g1-p0", { total: 0, components: {} }), /already has a reward/);
      await err(() => store.createRun(fixtureRun()), /already exists/);
      await err(() => store.createGroup(fixtureGroup("g1")), /already exists/);
      await err(() => store.createGroup(fixtureGroup("gx", "no-run")), /unknown run 'no-run'/);
      await err(() => store.createProgram(fixtureProgram(fixtureGroup("g1"), 0)), /already exists/);
      await err(() => store.createProgram({ ...fixtureProgram(fixtureGroup("g9"), 0) }), /unknown group 'g9'/);
      await err(() => store.createProgram({ ...fixtureProgram(fixtureGroup("g1"), 0), id: "x", taskId: "other" }), /is for task/);
      await err(() => store.listTrajectories("no-run"), /unknown run/);
      await err(() => store.stats("no-run"), /unknown run/);
      await store.finishRun("run-1", 9000);
      await err(() => store.finishRun("run-1", 9001), /already finished/);
      expect(await store.getRun("run-1")).toEqual({ ...fixtureRun(), endedAt: 9000 });
      // Nothing partial was written by the failed calls.
      expect((await store.getTrajectory("g2-p0"))?.calls).toHaveLength(1);
    });

    it("records context events in order, per program, and refuses them after the program ended", async () => {
      await populate();
      const ev = { programId: "g2-p0", callIndex: 2, policy: "discard-all", action: "discard" as const, tokensBefore: 820, tokensAfter: 64, messagesBefore: 9, messagesAfter: 2 };
      await store.recordContextEvent(ev);
      await store.recordContextEvent({ ...ev, callIndex: 5, policy: "summarize", action: "summarize", detail: "summary: 42" });
      expect((await store.getTrajectory("g2-p0"))?.contextEvents).toEqual([ev, { ...ev, callIndex: 5, policy: "summarize", action: "summarize", detail: "summary: 42" }]);
      expect((await store.getTrajectory("g1-p0"))?.contextEvents).toBeUndefined();
      const listed = await store.listTrajectories("run-1");
      expect(listed[2]?.contextEvents?.map((e) => e.callIndex)).toEqual([2, 5]);
      expect(listed[0]?.contextEvents).toBeUndefined();
      await expect(store.recordContextEvent({ ...ev, programId: "g1-p0" })).rejects.toThrow(/already ended/);
      await expect(store.recordContextEvent({ ...ev, programId: "ghost" })).rejects.toThrow(/unknown program 'ghost'/);
      await expect(store.recordContextEvent({ ...ev, action: "forget" as never })).rejects.toThrow(/unknown action 'forget'/);
      await expect(store.recordContextEvent({ ...ev, tokensAfter: -1 })).rejects.toThrow(/tokensAfter/);
      await store.endProgram("g2-p0", { kind: "sandbox_oom", detail: "node: Fatal process OOM" }, 4000);
      expect((await store.stats("run-1")).terminations.sandbox_oom).toBe(1);
      expect((await store.getTrajectory("g2-p0"))?.contextEvents).toHaveLength(2);
    });

    it("applies writes made without waiting in the order they were made, and a read sees them all", async () => {
      const g = fixtureGroup("g1", "run-1", 1);
      const writes = [
        store.createRun(fixtureRun()),
        store.createGroup(g),
        store.createProgram(fixtureProgram(g, 0)),
        ...[0, 1, 2].map((i) => store.recordCall(fixtureCall("g1-p0", i, [-0.5 - i]))),
        store.recordTool({ programId: "g1-p0", callIndex: 2, tool: "calc", input: "1+1", output: "2", ok: true, durationMs: 1 }),
        store.endProgram("g1-p0", { kind: "completed" }, 3000),
        store.setReward("g1-p0", { total: 1, components: { outcome: 1 } }),
      ];
      // The read is issued before any write has settled.
      const read = store.getTrajectory("g1-p0");
      await Promise.all(writes);
      const t = await read;
      expect(t?.calls.map((c) => c.index)).toEqual([0, 1, 2]);
      expect(t?.tools).toHaveLength(1);
      expect(t?.program.termination).toEqual({ kind: "completed" });
      expect(t?.reward?.total).toBe(1);
    });

    it("refuses one bad write among concurrent ones without losing the others", async () => {
      const g = fixtureGroup("g1", "run-1", 1);
      await store.createRun(fixtureRun());
      await store.createGroup(g);
      await store.createProgram(fixtureProgram(g, 0));
      const settled = await Promise.allSettled([
        store.recordCall(fixtureCall("g1-p0", 0, [-1])),
        store.recordCall({ ...fixtureCall("g1-p0", 0, [-2]), id: "dup-index" }),
        store.recordCall(fixtureCall("ghost", 0, [-1])),
        store.recordCall(fixtureCall("g1-p0", 1, [-3])),
      ]);
      expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "rejected", "fulfilled"]);
      expect(String((settled[1] as PromiseRejectedResult).reason)).toMatch(/already has a call at index 0/);
      expect((settled[2] as PromiseRejectedResult).reason).toBeInstanceOf(ArborError);
      expect((await store.getTrajectory("g1-p0"))?.calls.map((c) => c.id)).toEqual(["g1-p0-c0", "g1-p0-c1"]);
    });

    it("throws after close", async () => {
      await store.close();
      await expect(store.listRuns()).rejects.toThrow(/closed/);
      await expect(store.recordCall(fixtureCall("g1-p0", 0, [-1]))).rejects.toThrow(/closed/);
      await store.close();
    });

    if (opts.persistent) {
      it("returns identical trajectories after close and reopen (bit-exact tokens and logprobs)", async () => {
        await populate();
        const before = await store.listTrajectories("run-1");
        const groups = await store.listGroups("run-1");
        const stats = await store.stats("run-1");
        await store.close();
        store = await harness.open();
        const after = await store.listTrajectories("run-1");
        expect(after).toEqual(before);
        for (let i = 0; i < before.length; i++) {
          const b = before[i] as Trajectory;
          const a = after[i] as Trajectory;
          for (let j = 0; j < b.calls.length; j++) {
            expectBitExact(a.calls[j]?.logprobs ?? [], b.calls[j]?.logprobs ?? []);
            expect(a.calls[j]?.outputTokenIds).toEqual(b.calls[j]?.outputTokenIds);
          }
        }
        expectBitExact(after[0]?.calls[0]?.logprobs ?? [], TRICKY_LOGPROBS);
        expect(Object.is(after[0]?.calls[0]?.logprobs[3], -0)).toBe(true);
        expect(await store.listGroups("run-1")).toEqual(groups);
        expect(await store.stats("run-1")).toEqual(stats);
        // The reopened store keeps enforcing the lifecycle.
        await expect(store.endProgram("g1-p0", { kind: "completed" }, 1)).rejects.toThrow(/already ended/);
      });
    }
  });
}

