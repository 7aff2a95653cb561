// The judge reward over the real gateway: with scripted engines for exact scores and retries, and
// with the real tiny llama.cpp policy, whose untrained output is never a score (the clear error).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArborError } from "../../core/errors.js";
import { startRealEngineGateway, type RealEngineGateway } from "../../testing/real-engine-fixture.js";
import { composeRewards } from "../compose.js";
import { createOutcomeReward } from "../outcome.js";
import { ctx, trajectory } from "../../testing/reward-helpers.js";
import { createGatewayChat } from "./gateway-chat.js";
import { createJudgeReward, parseJudgeScore } from "./judge-reward.js";
import { startScriptedJudgeGateway, type ScriptedJudgeGateway } from "../../testing/scripted-judge-gateway.js";

describe("parseJudgeScore", () => {
  it("reads the last SCORE line, 0-10, as a fraction", () => {
    expect(parseJudgeScore("SCORE: 7")).toBe(0.7);
    expect(parseJudgeScore("reasoning... score = 10/10")).toBe(1);
    expect(parseJudgeScore("SCORE: 3\nOn reflection, SCORE: 4")).toBe(0.4);
    expect(parseJudgeScore("SCORE: 11")).toBeUndefined();
    expect(parseJudgeScore("looks good")).toBeUndefined();
  });
});

describe("judge reward through the gateway", () => {
  let scripted: ScriptedJudgeGateway;
  let flaky = 0;
  beforeAll(async () => {
    // Full marks for the answer 42, 3/10 otherwise; the answer "flaky" is unparsable once, then scored.
    scripted = await startScriptedJudgeGateway("judge-a", (prompt) => {
      if (prompt.includes("Final answer:\nflaky")) return flaky++ === 0 ? "I think it is fine" : "SCORE: 6";
      if (prompt.includes("Final answer:\nnever")) return "no idea";
      return prompt.includes("Final answer:\n42\n") ? "The answer is right. SCORE: 10" : "SCORE: 3";
    });
  });
  afterAll(async () => {
    await scripted?.close();
  });

  it("scores each program of a group with one judge program per request, then releases it", async () => {
    const chat = createGatewayChat({ gatewayUrl: scripted.url, adminToken: scripted.adminToken });
    const composed = composeRewards([
      { fn: createOutcomeReward(), weight: 1 },
      { fn: createJudgeReward(chat, { model: "judge-a" }), weight: 0.5 },
    ]);
    expect(() => composed.compute(ctx(trajectory(["42"], { kind: "completed" })))).toThrow(/reward.judge: is asynchronous/);
    const before = scripted.calls.length;
    const rewards = await composed.computeGroup([ctx(trajectory(["42"], { kind: "completed" })), ctx(trajectory(["41"], { kind: "completed" }))]);
    expect(rewards).toEqual([
      { total: 1.5, components: { outcome: 1, judge: 1 } },
      { total: 0.15, components: { outcome: 0, judge: 0.3 } },
    ]);
    const calls = scripted.calls.slice(before);
    expect(calls).toHaveLength(2);
    for (const c of calls) expect(c.programId).toMatch(/^judge\/p\//);
    const open = (await (await fetch(`${scripted.url}/programs`, { headers: { authorization: `Bearer ${scripted.adminToken}` } })).json()) as { programs: { id: string; state: string }[] };
    expect(open.programs.filter((p) => p.id.startsWith("judge/") && p.state === "active")).toEqual([]);
  });

  it("retries an unparsable answer and stops after maxAttempts with a clear error", async () => {
    const chat = createGatewayChat({ gatewayUrl: scripted.url, adminToken: scripted.adminToken });
    const judge = createJudgeReward(chat, { model: "judge-a", maxAttempts: 2 });
    expect(await judge.compute(ctx(trajectory(["flaky"], { kind: "completed" })))).toBe(0.6);
    const before = scripted.calls.length;
    await expect(judge.compute(ctx(trajectory(["never"], { kind: "completed" })))).rejects.toThrow(
      "judge model 'judge-a' gave no usable answer (SCORE: 0-10) for program 'p' after 2 attempt(s); last: unparsable answer \"no idea\"",
    );
    expect(scripted.calls.length - before).toBe(2);
  });

  it("names a gateway that refuses the judge (wrong admin token) after bounded attempts", async () => {
    const chat = createGatewayChat({ gatewayUrl: scripted.url, adminToken: "wrong-token-0123456789" });
    const judge = createJudgeReward(chat, { model: "judge-a", maxAttempts: 1 });
    await expect(judge.compute(ctx(trajectory(["42"], { kind: "completed" })))).rejects.toThrow(/could not be reached .*: 1 attempt\(s\) failed; last: request failed: gateway refused to open judge program 'judge\/p\/[^']+': 401/);
  });
});

describe("judge reward on the real tiny policy", () => {
  let real: RealEngineGateway;
  beforeAll(async () => {
    real = await startRealEngineGateway(0);
  }, 60_000);
  afterAll(async () => {
    await real?.close();
  });

  it("fails clearly when the judge model never writes a score", async () => {
    const judge = createJudgeReward(createGatewayChat({ gatewayUrl: real.url }), { model: "arbor-tiny", maxAttempts: 2, maxTokens: 12 });
    let err: unknown;
    try {
      await judge.compute(ctx(trajectory(["42"], { kind: "completed" })));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ArborError);
    expect((err as Error).message).toMatch(/^judge model 'arbor-tiny' gave no usable answer \(SCORE: 0-10\) for program 'p' after 2 attempt\(s\); last: unparsable answer /);
    // Both attempts reached the llama.cpp engine through the gateway, each as its own judge program.
    expect(real.calls).toHaveLength(2);
    expect(new Set(real.calls.map((c) => c.programId)).size).toBe(2);
    expect(real.calls.every((c) => c.outputTokenIds.length > 0)).toBe(true);
  }, 60_000);
});
