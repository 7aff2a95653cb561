import { describe, expect, it } from "vitest";
import { fixtureCall } from "../testing/store-fixtures.js";
import { checkCall, encodeTokenVersions, requireIteration } from "./value-checks.js";

describe("store value checks", () => {
  it("names the call and field a store would refuse", () => {
    const c = fixtureCall("p", 0, [-0.5, -1]);
    expect(() => checkCall(c)).not.toThrow();
    expect(() => checkCall({ ...c, id: "" })).toThrow("call.id: must be a non-empty string");
    expect(() => checkCall({ ...c, index: -1 })).toThrow("call 'p-c0' index: must be an integer >= 0, got -1");
    expect(() => checkCall({ ...c, timings: { start: 0, end: Number.NaN } })).toThrow("call 'p-c0' timings.end: must be a finite number, got NaN");
    expect(() => checkCall({ ...c, logprobs: [-1] })).toThrow("call 'p-c0': 1 logprobs for 2 output tokens");
    expect(() => checkCall({ ...c, contextResetReason: "full" })).toThrow("call 'p-c0': contextResetReason without contextReset");
    expect(() => checkCall({ ...c, messages: [{ role: "user", content: "x" }, undefined] as never })).toThrow("call 'p-c0' messages[1]: must be an object, got undefined");
    expect(() => checkCall({ ...c, messages: "hi" as never })).toThrow("call 'p-c0' messages: must be an array");
    expect(() => requireIteration(0)).toThrow("group.iteration: must be an integer >= 1, got 0");
  });

  it("encodes per-token policy versions, one per output token, or none", () => {
    const c = fixtureCall("p", 0, [-0.5, -1]);
    expect(encodeTokenVersions(c)).toBeNull();
    expect([...new Int32Array(new Uint8Array(encodeTokenVersions({ ...c, tokenPolicyVersions: [3, 4] }) as Buffer).buffer)]).toEqual([3, 4]);
    expect(() => encodeTokenVersions({ ...c, tokenPolicyVersions: [3] })).toThrow("call 'p-c0': 1 tokenPolicyVersions for 2 output tokens");
  });
});
