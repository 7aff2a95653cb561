// Every registered reward function passes the shared contract.
import { describe, expect, it } from "vitest";
import type { JudgeChat } from "./judge/gateway-chat.js";
import { createRewardFn, rewardFnNames } from "./registry.js";
import { rewardFnContract } from "./reward-fn.contract.js";

/** A deterministic stand-in for the judge model: full marks when the answer is 42. */
const scriptedJudge: JudgeChat = async (req) => (/Final answer:\n42\n/.test(req.messages[1]?.content ?? "") ? "SCORE: 10" : "SCORE: 2");
const deps = { options: { judge: { model: "judge-m" } }, judgeChat: scriptedJudge };

describe("reward functions", () => {
  it("are all covered by this suite", () => {
    expect(rewardFnNames().sort()).toEqual(["completion-time", "judge", "outcome", "process"]);
  });
  for (const name of rewardFnNames()) {
    describe(name, () => rewardFnContract(name, () => createRewardFn(name, deps)));
  }
});
