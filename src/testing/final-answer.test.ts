import { describe, expect, it } from "vitest";
import { finalAnswer } from "./final-answer.js";
import { trajectory } from "./reward-helpers.js";

describe("finalAnswer", () => {
  it("is the output text of the highest-index call, whatever the array order", () => {
    const t = trajectory(["first", "second", "last"]);
    expect(finalAnswer(t)).toBe("last");
    t.calls.reverse();
    expect(finalAnswer(t)).toBe("last");
  });
  it("is empty for a program without calls", () => {
    expect(finalAnswer(trajectory([]))).toBe("");
  });
});
