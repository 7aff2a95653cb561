import { describe, expect, it } from "vitest";
import { heldOutRunConfigJson, heldOutRunOf } from "./held-out-run.js";

describe("held-out run mark", () => {
  it("marks a stored config as a run's held-out evaluation, keeping the config", () => {
    const marked = heldOutRunConfigJson(JSON.stringify({ name: "q", train: { estimator: "grpo" } }), "q-123");
    expect(JSON.parse(marked)).toMatchObject({ name: "q", train: { estimator: "grpo" } });
    expect(heldOutRunOf(marked)).toBe("q-123");
  });

  it("tells other runs' configs apart, JSON or not", () => {
    expect(heldOutRunOf(JSON.stringify({ name: "q" }))).toBeUndefined();
    expect(heldOutRunOf("not json")).toBeUndefined();
    expect(heldOutRunOf("null")).toBeUndefined();
    expect(heldOutRunOf(heldOutRunConfigJson("not json", "r"))).toBe("r");
  });
});
