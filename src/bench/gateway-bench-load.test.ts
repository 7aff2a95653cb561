import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
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

  it("places a store-backed gateway's programs 8 to a group, going round the groups it is given", async () => {
    const created: { group_id: string; sample_index: number }[] = [];
    // A stand-in gateway: creates programs (recording where they were placed), answers chat, releases.
    const gw = createServer((req, res) => {
      let body = "";
      req.on("data", (d: Buffer) => (body += d.toString()));
      req.on("end", () => {
        if (req.url === "/programs") created.push(JSON.parse(body) as { group_id: string; sample_index: number });
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify(req.url?.endsWith("/chat/completions") ? { choices: [{ message: { content: "ok" } }] } : {}));
      });
    });
    await new Promise<void>((r) => gw.listen(0, "127.0.0.1", r));
    try {
      const gateway = `http://127.0.0.1:${(gw.address() as AddressInfo).port}`;
      const place = { groupPrefix: "g", groups: 2, taskId: "t" };
      await runLoad(plan({ mode: "throughput", clients: 3, requests: 40, warmup: 0, turns: 2, targets: [{ kind: "gateway", name: "g", gateway, place }] }));
      // At least 20 programs (a client's last one may end after one turn): the n-th (in any order of arrival) is
      // sample n % 8 of group g0, g1, g0, ... in turn, 8 to a group.
      expect(created.length).toBeGreaterThanOrEqual(20);
      const key = (g: string, s: number): string => `${g}/${s}`;
      const expected = created.map((_, n) => key(`g${Math.floor(n / 8) % 2}`, n % 8));
      expect(created.map((c) => key(c.group_id, c.sample_index)).sort()).toEqual(expected.sort());
    } finally {
      await new Promise((r) => gw.close(r));
    }
  });

  it("fails on an error answer and rejects bad plans naming the field", async () => {
    fake.failNext(500, "boom");
    await expect(runLoad(plan({ requests: 1, warmup: 0 }))).rejects.toThrow(/answered HTTP 500: .*boom/);
    expect(() => checkLoadPlan(plan({ turns: 0 }))).toThrow(/load plan turns: must be an integer >= 1, got 0/);
    expect(() => checkLoadPlan(plan({ targets: [] }))).toThrow(/load plan targets: must name at least one target/);
    const noGroups = { kind: "gateway" as const, name: "g", gateway: root, place: { groupPrefix: "g", groups: 0, taskId: "t" } };
    expect(() => checkLoadPlan(plan({ targets: [noGroups] }))).toThrow(/load plan targets\[0\]\.place\.groups: must be an integer >= 1, got 0/);
  });
});
