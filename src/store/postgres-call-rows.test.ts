import { describe, expect, it } from "vitest";
import type { Call } from "../core/types.js";
import { conversation } from "../testing/store-fixtures.js";
import { callWrite, contentSha } from "./postgres-call-rows.js";

describe("postgres call rows", () => {
  it("hashes column values so that no two lists share an encoding", () => {
    const hex = (v: unknown[]): string => contentSha(v).toString("hex");
    const lists: unknown[][] = [["ab", "c"], ["a", "bc"], [null], ["n;"], [1], ["1"], [true], ["true"], [Buffer.from("ab")], ["ab"], []];
    expect(new Set(lists.map(hex)).size).toBe(lists.length);
    expect(hex(["ab", 1, null])).toBe(hex(["ab", 1, null]));
  });

  it("stores a call over an earlier call of its program, whole over a later one, and hashes its whole content either way", () => {
    const [c0, c1] = conversation("p") as [Call, Call];
    const first = callWrite(c0, undefined);
    const over = callWrite(c1, first.context);
    const whole = callWrite(c1, callWrite(c1, first.context).context);
    // The stored row's delta columns (base_idx, prompt_shared, messages_shared) after the call's own.
    expect(over.stored.slice(-4, -1)).toEqual([0, 53, 2]);
    expect((over.stored[4] as Buffer).length).toBe(4);
    expect(whole.stored.slice(-4, -1)).toEqual([null, 0, 0]);
    expect(whole.stored[4]).toEqual(whole.whole[4]);
    expect(over.sha).toEqual(whole.sha);
    expect(over.whole).toEqual(whole.whole);
  });

  it("names the call and field of an invalid value", () => {
    const [c0] = conversation("p") as [Call];
    expect(() => callWrite({ ...c0, promptTokenIds: [1, -2] }, undefined)).toThrow("call 'p-c0' promptTokenIds[1]: token id must be an integer");
    expect(() => callWrite({ ...c0, logprobs: [] }, undefined)).toThrow("call 'p-c0': 0 logprobs for 3 output tokens");
  });
});
