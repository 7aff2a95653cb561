import { describe, expect, it } from "vitest";
import { createEnvironment, environmentNames } from "./registry.js";

describe("environment registry", () => {
  it("creates every environment and lists known names for an unknown one", () => {
    expect(environmentNames).toEqual(["calc", "swe-mini", "search-qa"]);
    for (const name of environmentNames) expect(createEnvironment(name).name).toBe(name);
    expect(createEnvironment("swe-mini", { hygiene: { zeroRewardOnViolation: true } }).hygiene).toEqual({ zeroRewardOnViolation: true });
    expect(() => createEnvironment("chess")).toThrow("unknown environment 'chess' (known: calc, swe-mini, search-qa)");
    expect(() => createEnvironment("toString")).toThrow(/unknown environment 'toString'/);
  });
});
