import { describe, expect, it } from "vitest";
import type { Call, Group, Trajectory } from "../core/types.js";
import { buildSamples } from "./samples.js";

function call(programId: string, index: number, prompt: number[], output: number[], logprobs: number[]): Call {
  return {
    id: `${programId}-c${index}`,
    programId,
    index,
    messages: [{ role: "user", content: "q" }],
    promptTokenIds: prompt,
    outputTokenIds: output,
    logprobs,
    outputText: "x",
    finishReason: "stop",
    backend: "b",
    policyVersion: 7 + index,
    timings: { start: 0, end: 1 },
  };
}

function traj(id: string, groupId: string, calls: Call[], total?: number): Trajectory {
  const t: Trajectory = {
    program: {
      id,
      runId: "r",
      taskId: `task-${groupId}`,
      groupId,
      sampleIndex: 0,
      state: "terminated",
      createdAt: 0,
      termination: { kind: "completed" },
    },
    calls,
    tools: [],
  };
  if (total !== undefined) t.reward = { total, components: { outcome: total } };
  return t;
}

const groupA: Group = { id: "A", runId: "r", taskId: "task-A", programIds: ["a0", "a1", "a2", "a3"] };
const groupB: Group = { id: "B", runId: "r", taskId: "task-B", programIds: ["b0"] };

function fixture(): Trajectory[] {
  return [
    // Calls deliberately out of index order: samples follow the index.
    traj("a0", "A", [call("a0", 1, [1, 2, 3, 9, 8], [10], [-0.5]), call("a0", 0, [1, 2, 3], [9, 8], [-1e-12, -23.5])], 1),
    traj("a1", "A", [call("a1", 0, [1, 2, 3], [4], [-2])], 0),
    traj("a2", "A", [], 0),
    traj("a3", "A", [call("a3", 0, [1, 2, 3], [5, 6, 7], [-0.1, -0.2, -0.3])], 1),
    traj("b0", "B", [call("b0", 0, [1], [2], [-3])], 0.25),
  ];
}

describe("buildSamples", () => {
  it("skips text-only calls (trainable: false) but still counts their program in its group", () => {
    const t = fixture();
    const textOnly: Call = { ...call("a1", 1, [], [], []), outputText: "from a generic provider", trainable: false };
    t[1] = traj("a1", "A", [...t[1]!.calls, textOnly], 0);
    const samples = buildSamples(t, [groupA, groupB]);
    expect(samples.map((s) => s.callId)).toEqual(["a0-c0", "a0-c1", "a1-c0", "a3-c0", "b0-c0"]);
    // The same advantages as without the text-only call: the program's reward still counts.
    expect(samples.map((s) => s.advantage)).toEqual(buildSamples(fixture(), [groupA, groupB]).map((s) => s.advantage));
  });

  it("makes one sample per call with aligned mask and logprobs", () => {
    const samples = buildSamples(fixture(), [groupA, groupB]);
    expect(samples.map((s) => `${s.programId}/${s.callIndex}`)).toEqual(["a0/0", "a0/1", "a1/0", "a3/0", "b0/0"]);
    const s = samples[0];
    expect(s).toMatchObject({ groupId: "A", taskId: "task-A", callId: "a0-c0", policyVersion: 7, reward: 1 });
    expect(s?.tokenIds).toEqual([1, 2, 3, 9, 8]);
    expect(s?.lossMask).toEqual([0, 0, 0, 1, 1]);
    expect(s?.oldLogprobs).toEqual([0, 0, 0, -1e-12, -23.5]);
    expect(samples[1]?.tokenIds).toEqual([1, 2, 3, 9, 8, 10]);
    expect(samples[1]?.lossMask).toEqual([0, 0, 0, 0, 0, 1]);
    expect(samples[1]?.oldLogprobs).toEqual([0, 0, 0, 0, 0, -0.5]);
    expect(samples[1]?.policyVersion).toBe(8);
    for (const x of samples) {
      expect(x.lossMask).toHaveLength(x.tokenIds.length);
      expect(x.oldLogprobs).toHaveLength(x.tokenIds.length);
      x.lossMask.forEach((m, i) => m === 0 && expect(x.oldLogprobs[i]).toBe(0));
    }
  });

  it("broadcasts the group-normalised advantage to every call of a program", () => {
    const samples = buildSamples(fixture(), [groupA, groupB]);
    const h = 0.5 / (Math.sqrt(1 / 3) + 1e-6); // rewards [1,0,0,1]
    const adv = Object.fromEntries(samples.map((s) => [`${s.programId}/${s.callIndex}`, s.advantage]));
    expect(adv["a0/0"]).toBeCloseTo(h, 12);
    expect(adv["a0/1"]).toBe(adv["a0/0"]);
    expect(adv["a1/0"]).toBeCloseTo(-h, 12);
    expect(adv["a3/0"]).toBeCloseTo(h, 12);
    // a2 made no call: no sample, but its reward still shaped the group's mean and std.
    expect(adv["b0/0"]).toBe(0);
  });

  it("names the program when a reward, a group or a trajectory is missing", () => {
    const t = fixture();
    delete t[1]?.reward;
    expect(() => buildSamples(t, [groupA, groupB])).toThrow("program 'a1' has no reward");
    expect(() => buildSamples(fixture(), [groupA])).toThrow("program 'b0' is in no given group (its group is 'B')");
    expect(() => buildSamples(fixture().slice(1), [groupA, groupB])).toThrow("group 'A': program 'a0' has no trajectory");
    const bad = fixture();
    const c = bad[0]?.calls[0];
    if (c) c.logprobs = [];
    expect(() => buildSamples(bad, [groupA, groupB])).toThrow("call 'a0-c1' of program 'a0': 0 logprobs for 1 output tokens");
    expect(() => buildSamples([...fixture(), ...fixture()], [groupA, groupB])).toThrow("program 'a0' appears twice");
  });
});
