// arbor sim's progress without a terminal: a line as each system starts and one as it ends, nothing per advance.
import { describe, expect, it } from "vitest";
import type { SimSystemResult } from "../sim/scenario/sim-report.js";
import { simProgress, systemLine } from "./sim-progress.js";

describe("simProgress without bars", () => {
  it("logs a line when a system starts and when it ends, nothing as it advances", () => {
    const lines: string[] = [];
    const p = simProgress("seer-moonlight", false, (l) => lines.push(l));
    const result = { summary: { iterationMs: 12_345, completed: 7, requests: 8, outputTokens: 900 } } as SimSystemResult;
    p.system("seer");
    p.advance("seer", 3, 8);
    p.system("seer", result);
    p.stop();
    expect(lines).toEqual(["arbor sim seer-moonlight: seer …", "arbor sim seer-moonlight: seer: iteration 12.3 s, 7/8 requests, 900 tokens"]);
    expect(systemLine("w", "s")).toBe("arbor sim w: s …");
  });
});
