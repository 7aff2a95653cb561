import { describe, expect, it } from "vitest";
import { tapSummary } from "./hidden-tests.js";

// runHiddenTests itself runs in real sandboxes in swe-mini.test.ts and ../golden.test.ts.
describe("tapSummary", () => {
  it("reads the last summary, so a forged one printed earlier does not count", () => {
    expect(tapSummary("# pass 3\n# fail 0\nok 1 - x\n# pass 1\n# fail 2\n")).toEqual({ pass: 1, fail: 2 });
    expect(tapSummary("ok 1 - x\n")).toBeUndefined();
  });
});
