import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fakeChatPrompt, startFakeVllm, type FakeVllm } from "../backends/fake-vllm.js";
import { checkLoadPlan, runLoad, systemPrompt, type LoadPlan } from "./gateway-bench-load.js";

let fake: FakeVllm;
let root: string;

beforeAll(async () => {
  fake = await startFakeVllm();
  root = fake.url.replace(/\/v1$/, "");
});

afterAll(async () => {
  await fake?.close();
});

const plan = (over: Partial<LoadPlan>): LoadPlan => ({
  mode: "latency",
  targets: [{ kind: "direct", name: "d", upstream: root }],
  requests: 5,
  warmup: 1,
  clients: 1,
  turns: 3,
  maxTokens: 8,
  systemChars: 50,
  programPrefix: "t",
  ...over,
});

describe("gateway bench load generator", () => {
  it("sends multi-turn conversations: each turn resends the previous answer and ends with a new user turn", async () => {
    const before = fake.requests.length;
    const [r] = await runLoad(plan({}));
    expect(r).toMatchObject({ name: "d", requests: 5, sent: 6, programs: 0 });
    expect(r!.latenciesMs).toHaveLength(5);
    expect(r!.latenciesMs).toEqual([...r!.latenciesMs].sort((a, b) => a - b));
    const sent = fake.requests.slice(before).map((q) => q.body.messages as { role: string; content: string }[]);
    expect(sent.map((m) => m.length)).toEqual([2, 4, 6, 2, 4, 6]);
    expect(sent[0]![0]).toEqual({ role: "system", content: systemPrompt(50) });
    // Turn 2 carries turn 1's answer as the engine gave it (the fake's deterministic reply, cut at max_tokens).
    const firstAnswer = sent[1]![2]!;
    expect(firstAnswer.role).toBe("assistant");
    expect(firstAnswer.content).toBe(`echo: ${fakeChatPrompt(sent[0]!).slice(-16)}`.slice(0, 8));
  });

  it("makes the token path's three upstream calls per turn on direct-token-calls, and runs concurrent clients in throughput mode", async () => {
    const before = fake.requests.length;
    const [r] = await runLoad(plan({ mode: "throughput", clients: 3, requests: 9, warmup: 0, targets: [{ kind: "direct-token-calls", name: "tc", upstream: root }] }));
    expect(r).toMatchObject({ name: "tc", requests: 9, sent: 9 });
    expect(r!.latenciesMs).toHaveLength(9);
    // /tokenize and /detokenize are not inference requests; the generation from ids is.
    const gens = fake.requests.slice(before);
    expect(gens).toHaveLength(9);
    for (const g of gens) expect(g.path).toBe("/completions");
    expect(gens.every((g) => Array.isArray(g.body.prompt) && g.body.return_token_ids === true)).toBe(true);
  });

  it("fails on an error answer and rejects bad plans naming the field", async () => {
    fake.failNext(500, "boom");
    await expect(runLoad(plan({ requests: 1, warmup: 0 }))).rejects.toThrow(/answered HTTP 500: .*boom/);
    expect(() => checkLoadPlan(plan({ turns: 0 }))).toThrow(/load plan turns: must be an integer >= 1, got 0/);
    expect(() => checkLoadPlan(plan({ targets: [] }))).toThrow(/load plan targets: must name at least one target/);
  });
});
