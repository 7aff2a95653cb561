import { describe, expect, it } from "vitest";
import type { Call, Group, Trajectory } from "../core/types.js";
import { buildSampleSet } from "./trajectory-samples.js";

function call(programId: string, index: number, prompt: number[], output: number[], version: number, extra: Partial<Call> = {}): Call {
  return {
    id: `${programId}-c${index}`,
    programId,
    index,
    messages: [],
    promptTokenIds: prompt,
    outputTokenIds: output,
    logprobs: output.map((_, i) => -(index + 1) / 10 - i / 100),
    outputText: "",
    finishReason: "stop",
    backend: "b",
    policyVersion: version,
    timings: { start: 0, end: 1 },
    ...extra,
  };
}

function traj(id: string, calls: Call[], total: number, components: Record<string, number> = {}): Trajectory {
  return {
    program: { id, runId: "r", taskId: "t", groupId: "g", sampleIndex: 0, state: "terminated", createdAt: 0 },
    calls,
    tools: [],
    reward: { total, components },
  };
}

const group: Group = { id: "g", runId: "r", taskId: "t", programIds: ["p0", "p1"] };

function fixture(): Trajectory[] {
  return [
    traj(
      "p0",
      [
        // Out of order on purpose: calls are taken by index.
        call("p0", 1, [1, 2, 3, 4, 9, 9], [5], 6), // extends call 0; 9,9 is tool output
        call("p0", 0, [1, 2], [3, 4], 5),
        call("p0", 2, [1, 7], [8], 6, { contextReset: true }),
        call("p0", 3, [], [], 6, { trainable: false }),
        call("p0", 4, [1, 7, 8, 6], [2], 7), // extends segment 1 (6 = tool output)
        call("p0", 5, [1, 7, 8], [4], 7), // drops a token: not an extension, though not flagged
      ],
      1,
      { outcome: 1, "step:1": 0.25 },
    ),
    traj("p1", [], 0),
  ];
}

describe("buildSampleSet", () => {
  it("merges calls that extend the previous context and starts a segment at each reset", () => {
    const { samples, programs } = buildSampleSet(fixture(), [group], "merged");
    expect(samples.map((s) => s.id)).toEqual(["p0#s0", "p0#s1", "p0#s2"]);
    const [s0, s1, s2] = samples;
    expect(s0).toMatchObject({
      callIds: ["p0-c0", "p0-c1"],
      segment: 0,
      tokenIds: [1, 2, 3, 4, 9, 9, 5],
      lossMask: [0, 0, 1, 1, 0, 0, 1],
      oldLogprobs: [0, 0, -0.1, -0.11, 0, 0, -0.2],
      versions: [-1, -1, 5, 5, -1, -1, 6],
      chunks: [-1, -1, 0, 0, -1, -1, 1],
    });
    expect(s1).toMatchObject({ callIds: ["p0-c2", "p0-c4"], segment: 1, tokenIds: [1, 7, 8, 6, 2], lossMask: [0, 0, 1, 0, 1], chunks: [-1, -1, 2, -1, 3] });
    expect(s1?.versions).toEqual([-1, -1, 6, -1, 7]);
    expect(s2).toMatchObject({ callIds: ["p0-c5"], segment: 2, tokenIds: [1, 7, 8, 4], lossMask: [0, 0, 0, 1], chunks: [-1, -1, -1, 4] });
    // The text-only call is no chunk; p1 has no calls but still is an outcome of its group.
    expect(programs).toEqual([
      // The outcome component rides along (advantage shaping tells solved programs by it); p1's reward has none.
      { programId: "p0", groupId: "g", reward: 1, chunkCount: 5, chunkLengths: [2, 1, 1, 1, 1], stepRewards: [0, 0.25, 0, 0, 0], outcome: 1 },
      { programId: "p1", groupId: "g", reward: 0, chunkCount: 0, chunkLengths: [] },
    ]);
  });

  it("keeps one sample per trainable call in per-call mode, masks prompts and carries chunk ids", () => {
    const { samples } = buildSampleSet(fixture(), [group], "per-call");
    expect(samples.map((s) => s.id)).toEqual(["p0-c0", "p0-c1", "p0-c2", "p0-c4", "p0-c5"]);
    expect(samples[1]).toMatchObject({ tokenIds: [1, 2, 3, 4, 9, 9, 5], lossMask: [0, 0, 0, 0, 0, 0, 1], chunks: [-1, -1, -1, -1, -1, -1, 1] });
    expect(samples[1]?.versions).toEqual([-1, -1, -1, -1, -1, -1, 6]);
    for (const s of samples) for (const f of ["lossMask", "oldLogprobs", "versions", "chunks"] as const) expect(s[f]).toHaveLength(s.tokenIds.length);
  });

  it("the model tokens of the merged and per-call forms are the same multiset", () => {
    const key = (mode: "merged" | "per-call"): string[] =>
      buildSampleSet(fixture(), [group], mode)
        .samples.flatMap((s) => s.tokenIds.map((t, i) => (s.lossMask[i] ? `${s.chunks[i]}:${t}:${s.oldLogprobs[i]}:${s.versions[i]}` : "")))
        .filter((x) => x !== "")
        .sort();
    expect(key("merged")).toEqual(key("per-call"));
  });

  it("carries each token's own policy version when a call was resumed on new weights mid-way", () => {
    const resumed = [
      call("p0", 0, [1, 2], [3, 4], 5),
      call("p0", 1, [1, 2, 3, 4, 9], [6, 7, 8], 6, { tokenPolicyVersions: [5, 5, 6] }),
    ];
    const set = (mode: "merged" | "per-call") => buildSampleSet([traj("p0", resumed, 1), traj("p1", [], 0)], [group], mode).samples;
    expect(set("merged")[0]!.versions).toEqual([-1, -1, 5, 5, -1, 5, 5, 6]);
    expect(set("per-call")[1]!.versions).toEqual([-1, -1, -1, -1, -1, 5, 5, 6]);
    const short = [call("p0", 0, [1], [2, 3], 5, { tokenPolicyVersions: [5] })];
    expect(() => buildSampleSet([traj("p0", short, 1), traj("p1", [], 0)], [group])).toThrow(/call 'p0-c0' of program 'p0': 1 tokenPolicyVersions for 2 output tokens/);
  });

  it("rejects inconsistent input naming the program or call", () => {
    const t = fixture();
    t[0]!.calls[1]!.logprobs = [];
    expect(() => buildSampleSet(t, [group])).toThrow(/call 'p0-c0' of program 'p0': 0 logprobs for 2 output tokens/);
    expect(() => buildSampleSet(fixture(), [{ ...group, programIds: ["p0"] }])).toThrow(/program 'p1' is in no given group/);
    const noReward = fixture();
    delete noReward[1]!.reward;
    expect(() => buildSampleSet(noReward, [group])).toThrow(/program 'p1' has no finite reward/);
    expect(() => buildSampleSet(fixture(), [group, { ...group, id: "g" }])).toThrow(/more than one group/);
    const bad = fixture();
    bad[0]!.reward!.components["step:9"] = 1;
    expect(() => buildSampleSet(bad, [group])).toThrow(/'step:9' names chunk 9 but the program has 5/);
  });
});
