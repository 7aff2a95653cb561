import { describe, expect, it } from "vitest";
import { draftFileName, draftModelPath } from "./draft-model-path.js";

describe("draftModelPath", () => {
  it("puts draft-vN.gguf beside policy-vN.gguf", () => {
    expect(draftModelPath("/runs/a/ckpt/policy-v12.gguf")).toBe("/runs/a/ckpt/draft-v12.gguf");
    expect(draftFileName(0)).toBe("draft-v0.gguf");
  });

  it("refuses a path that is not a versioned checkpoint and a bad version", () => {
    expect(() => draftModelPath("/m/calc-sft.gguf")).toThrow(/not a versioned policy checkpoint/);
    expect(() => draftFileName(-1)).toThrow(/version must be an integer >= 0/);
  });
});
