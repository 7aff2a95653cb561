// Every registered environment passes the environment contract (environment.contract.ts): deterministic
// tasks, well-formed golden conversations, and "golden solutions pass, empty solutions fail" for every task.
import { describe, expect, it } from "vitest";
import { environmentContract } from "./environment.contract.js";
import { createEnvironment, environmentNames } from "./registry.js";
import { loadSweTasks } from "./swe-mini/task-data.js";

/** How many tasks each environment is checked on (every task where the set is finite). */
const COUNTS: Record<string, () => number> = { calc: () => 30, "search-qa": () => 60, "swe-mini": () => loadSweTasks().length };

describe("every environment", () => {
  it("is covered here, and swe-mini has at least 20 tasks", () => {
    expect(Object.keys(COUNTS).sort()).toEqual([...environmentNames].sort());
    expect(COUNTS["swe-mini"]!()).toBeGreaterThanOrEqual(20);
  });

  for (const name of environmentNames) {
    describe(name, () => environmentContract(name, () => createEnvironment(name), { count: COUNTS[name]!() }));
  }
});
