import { describe, expect, it } from "vitest";
import { createEnvironment, environmentNames } from "./registry.js";

describe("environment registry", () => {
  it("creates calc and lists known names for an unknown one", () => {
    expect(createEnvironment("calc").name).toBe("calc");
    expect(environmentNames).toContain("calc");
    expect(() => createEnvironment("chess")).toThrow("unknown environment 'chess' (known: calc)");
    expect(() => createEnvironment("toString")).toThrow(/unknown environment 'toString'/);
  });
});
