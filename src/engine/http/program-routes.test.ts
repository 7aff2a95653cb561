import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderChat } from "../../model/chat-template.js";
import { ensurePolicy } from "../../model/policy.js";
import { Vocab } from "../../model/vocab.js";
import { REDIS_TEST_URL, redisUnreachable } from "../../testing/redis-test.js";
import type { LlamaCppStepRunner, LlamaCppStepRunnerStats } from "../core/llamacpp-step-runner.js";
import type { ScheduledExecutor } from "../core/scheduled-executor.js";
import { RedisStatePool } from "../kv/redis-state-pool.js";
import { L3StateTier } from "../kv/state-tier.js";
import { createEngineServer, type EngineServer, type EngineServerOptions } from "../server.js";

const INIT = { seed: 5, nEmbd: 32, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 96, contextLength: 1024 };
const GEN = 8;
const vocab = new Vocab();
/** The tool result appended to turn 1 for turn 2 (the template's tool message, then `<|assistant|>`). */
const TOOL = renderChat([{ role: "tool", content: "result: 42" }], (t) => vocab.encode(t), vocab).slice(1);

let dir: string;
let modelPath: string;
let l3: L3StateTier;
/** Reference (uninterrupted programs), A and B (sharing L3), P (1 sequence, priority), V (v0 executor). */
let R: EngineServer, A: EngineServer, B: EngineServer, P: EngineServer, V: EngineServer;
const servers: EngineServer[] = [];

interface Turn {
  prompt: number[];
  ids: number[];
  logprobs: number[];
}

async function open(o: Partial<EngineServerOptions>): Promise<EngineServer> {
  const s = await createEngineServer({
    name: "t",
    modelPath,
    policyVersion: 1,
    sequences: 2,
    contextSize: 256,
    maxWaiting: 8,
    executorKind: "llamacpp-scheduled",
    ...o,
  });
  servers.push(s);
  return s;
}

const messages = (user: string) => [
  { role: "system", content: "You are a calculator." },
  { role: "user", content: user },
];

/** Turn 1: a chat completion of the program. */
async function turn1(s: EngineServer, program: string, user: string, viaHeader = false): Promise<Turn> {
  const res = await s.app.inject({
    method: "POST",
    url: "/v1/chat/completions",
    headers: viaHeader ? { "x-arbor-program": program } : {},
    payload: {
      messages: messages(user),
      max_tokens: GEN,
      temperature: 0.9,
      seed: 7,
      logprobs: true,
      return_token_ids: true,
      ...(viaHeader ? {} : { program_id: program }),
    },
  });
  expect(res.statusCode, res.body).toBe(200);
  const b = res.json() as { prompt_token_ids: number[]; choices: { token_ids: number[]; logprobs: { content: { logprob: number }[] } }[] };
  const c = b.choices[0]!;
  return { prompt: b.prompt_token_ids, ids: c.token_ids, logprobs: c.logprobs.content.map((x) => x.logprob) };
}

/** Turn 2: turn 1's prompt and output, then the tool result, as token ids. */
function turn2Request(s: EngineServer, program: string, t1: Turn) {
  return s.app.inject({
    method: "POST",
    url: "/v1/completions",
    payload: { prompt: [...t1.prompt, ...t1.ids, ...TOOL], max_tokens: GEN, temperature: 0.9, seed: 8, logprobs: 0, return_token_ids: true, program_id: program },
  });
}

async function turn2(s: EngineServer, program: string, t1: Turn): Promise<Turn> {
  return parseTurn2(await turn2Request(s, program, t1));
}

function parseTurn2(res: { statusCode: number; body: string; json: () => unknown }): Turn {
  expect(res.statusCode, res.body).toBe(200);
  const c = (res.json() as { choices: { token_ids: number[]; prompt_token_ids: number[]; logprobs: { token_logprobs: number[] } }[] }).choices[0]!;
  return { prompt: c.prompt_token_ids, ids: c.token_ids, logprobs: c.logprobs.token_logprobs };
}

function expectSame(got: Turn, want: Turn): void {
  expect(got.ids).toEqual(want.ids);
  got.logprobs.forEach((lp, i) => expect(Math.abs(lp - want.logprobs[i]!)).toBeLessThan(1e-6));
}

/** The same program run uninterrupted on the reference engine. */
async function reference(program: string, user: string): Promise<{ t1: Turn; t2: Turn }> {
  const t1 = await turn1(R, program, user);
  return { t1, t2: await turn2(R, program, t1) };
}

const runnerStats = (s: EngineServer): LlamaCppStepRunnerStats => ((s.executor as ScheduledExecutor).runner as LlamaCppStepRunner).stats();

async function post(s: EngineServer, url: string, payload?: object) {
  const res = await s.app.inject({ method: "POST", url, ...(payload === undefined ? {} : { payload }) });
  return { status: res.statusCode, body: res.json() as Record<string, unknown> & { error?: { param: string | null; message: string } } };
}

async function info(s: EngineServer, id: string) {
  const res = await s.app.inject({ method: "GET", url: `/v1/programs/${id}` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { paused: string | null; kv_location: string; kv_tokens: number; held_requests: number; running_requests: number };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-program-routes-"));
  modelPath = ensurePolicy(dir, INIT).path;
  l3 = new L3StateTier({ capacityBytes: 64 * 1024 * 1024, dir: join(dir, "l3") });
  R = await open({});
  A = await open({ l3Store: l3 });
  B = await open({ l3Store: l3 });
  P = await open({ sequences: 1, schedulingPolicy: "priority" });
  V = await open({ sequences: 1, executorKind: "llamacpp" });
});

afterAll(async () => {
  for (const s of servers) await s.close();
  l3?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("program pause/restore over HTTP", () => {
  it("paused to L3 on engine A, turn 2 on engine B loads the state and continues exactly", async () => {
    const ref = await reference("ref-l3", "What is 2+3?");
    const t1 = await turn1(A, "p-l3", "What is 2+3?");
    expectSame(t1, ref.t1);
    // Held in a sequence of A: the context of turn 1 (the last sampled token was never fed).
    expect(await info(A, "p-l3")).toMatchObject({ paused: null, kv_location: "L1", kv_tokens: t1.prompt.length + t1.ids.length - 1 });

    const paused = await post(A, "/v1/programs/p-l3/pause", { to: "L3" });
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ object: "program", id: "p-l3", paused: "L3", kv_location: "L3", held_requests: 0 });
    expect(l3.keys()).toContain("p-l3");
    expect(await info(B, "p-l3")).toMatchObject({ paused: null, kv_location: "L3", kv_tokens: t1.prompt.length + t1.ids.length - 1 });

    const before = runnerStats(B);
    const t2 = await turn2(B, "p-l3", t1);
    expect(t2.prompt).toEqual(ref.t2.prompt);
    expectSame(t2, ref.t2);
    const after = runnerStats(B);
    expect(after.loadedStates - before.loadedStates).toBe(1);
    expect(after.loadedTokens - before.loadedTokens).toBe(t1.prompt.length + t1.ids.length - 1);
    expect(after.recomputedTokens - before.recomputedTokens).toBe(0);
    // Only the last turn-1 token and the tool result were evaluated for the prompt (+ GEN-1 decodes).
    expect(after.evaluatedTokens - before.evaluatedTokens).toBe(1 + TOOL.length + GEN - 1);
    // The state was consumed: it lives in B's sequence now.
    expect(l3.keys()).not.toContain("p-l3");
    expect((await post(A, "/v1/programs/p-l3/restore")).body).toMatchObject({ paused: null, kv_location: "none" });
  });

  it("paused to L2 holds its requests until restored, then loads the state on the same engine", async () => {
    const ref = await reference("ref-l2", "What is 7+1?");
    const t1 = await turn1(A, "p-l2", "What is 7+1?", true);
    expectSame(t1, ref.t1);
    const paused = await post(A, "/v1/programs/p-l2/pause", { to: "L2" });
    expect(paused.body).toMatchObject({ paused: "L2", kv_location: "L2", kv_tokens: t1.prompt.length + t1.ids.length - 1 });

    const before = runnerStats(A);
    const pending = turn2Request(A, "p-l2", t1);
    let held = await info(A, "p-l2");
    for (let i = 0; held.held_requests === 0 && i < 100_000; i++) {
      await new Promise((r) => setImmediate(r));
      held = await info(A, "p-l2");
    }
    expect(held).toMatchObject({ paused: "L2", held_requests: 1, running_requests: 0 });
    expect(runnerStats(A).evaluatedTokens).toBe(before.evaluatedTokens);

    expect((await post(A, "/v1/programs/p-l2/restore")).body).toMatchObject({ paused: null });
    const t2 = parseTurn2(await pending);
    expectSame(t2, ref.t2);
    const after = runnerStats(A);
    expect(after.loadedStates - before.loadedStates).toBe(1);
    expect(after.loadedTokens - before.loadedTokens).toBe(t1.prompt.length + t1.ids.length - 1);
    expect(after.recomputedTokens - before.recomputedTokens).toBe(0);
  });

  it("a pause during a running request saves its context once the request finishes", async () => {
    const ref = await reference("ref-run", "What is 4+4?");
    const first = turn1(A, "p-run", "What is 4+4?");
    let now = await info(A, "p-run");
    for (let i = 0; now.running_requests === 0 && i < 100_000; i++) {
      await new Promise((r) => setImmediate(r));
      now = await info(A, "p-run");
    }
    expect(now.running_requests).toBe(1);
    const paused = await post(A, "/v1/programs/p-run/pause", { to: "L2" });
    const t1 = await first;
    expectSame(t1, ref.t1);
    expect(paused.body).toMatchObject({ paused: "L2", kv_location: "L2", kv_tokens: t1.prompt.length + t1.ids.length - 1, running_requests: 0 });
    await post(A, "/v1/programs/p-run/restore");
    const before = runnerStats(A);
    expectSame(await turn2(A, "p-run", t1), ref.t2);
    expect(runnerStats(A).loadedStates - before.loadedStates).toBe(1);
  });

  it("drop forgets the KV: turn 2 on another engine recomputes and still gives the same tokens", async () => {
    const ref = await reference("ref-drop", "Compute 9*9 now.");
    const t1 = await turn1(A, "p-drop", "Compute 9*9 now.");
    expect((await post(A, "/v1/programs/p-drop/pause", { to: "drop" })).body).toMatchObject({ paused: "drop", kv_location: "none", kv_tokens: 0 });
    const before = runnerStats(B);
    const t2 = await turn2(B, "p-drop", t1);
    expectSame(t2, ref.t2);
    const after = runnerStats(B);
    expect(after.loadedStates).toBe(before.loadedStates);
    // At most the shared system prompt is reused from B's free sequences; the rest is evaluated.
    expect(after.evaluatedTokens - before.evaluatedTokens).toBeGreaterThan(t2.prompt.length / 2);
    await post(A, "/v1/programs/p-drop/restore");
  });

  it("a priority engine serves waiting requests by priority (lower first), then by arrival", async () => {
    const order: string[] = [];
    const send = (name: string, priority: number, maxTokens: number) =>
      P.app
        .inject({ method: "POST", url: "/v1/completions", payload: { prompt: [1, 300, 301, 302, 303, 304], max_tokens: maxTokens, seed: 1, priority } })
        .then((res) => {
          expect(res.statusCode, res.body).toBe(200);
          order.push(name);
        });
    // One sequence: "first" runs while the others wait, then they go by priority.
    await Promise.all([send("first", 0, 24), send("low", 5, 2), send("high", 1, 2), send("low2", 5, 2)]);
    expect(order).toEqual(["first", "high", "low", "low2"]);
  });

  it("answers 501 on the v0 executor, 400 naming the field on bad input", async () => {
    const v0 = await post(V, "/v1/programs/x/pause", { to: "L2" });
    expect(v0.status).toBe(501);
    expect(v0.body.error?.message).toMatch(/does not support program pause\/restore/);
    expect((await V.app.inject({ method: "GET", url: "/v1/programs/x" })).statusCode).toBe(501);
    expect((await post(V, "/v1/programs/x/restore")).status).toBe(501);

    const bad = async (s: EngineServer, url: string, payload: unknown, param: string, headers: Record<string, string> = {}) => {
      const res = await s.app.inject({ method: "POST", url, payload: payload as object, headers });
      expect(res.statusCode, res.body).toBe(400);
      expect((res.json() as { error: { param: string } }).error.param).toBe(param);
    };
    const base = { prompt: [1, 300, 301], max_tokens: 2 };
    await bad(P, "/v1/completions", { ...base, priority: 1.5 }, "priority");
    await bad(A, "/v1/completions", { ...base, priority: 3 }, "priority");
    await bad(V, "/v1/completions", { ...base, priority: -1 }, "priority");
    await bad(A, "/v1/completions", { ...base, program_id: "" }, "program_id");
    await bad(A, "/v1/chat/completions", { messages: messages("hi"), program_id: 5 }, "program_id");
    await bad(A, "/v1/completions", { ...base, program_id: "a" }, "program_id", { "x-arbor-program": "b" });
    await bad(A, "/v1/programs/x/pause", { to: "L4" }, "to");
    await bad(A, "/v1/programs/x/pause", {}, "to");
    await bad(R, "/v1/programs/x/pause", { to: "L3" }, "to");
    // Priority 0 is the default everywhere; program ids are accepted (and ignored) by the v0 executor.
    expect((await V.app.inject({ method: "POST", url: "/v1/completions", payload: { ...base, priority: 0, program_id: "v" } })).statusCode).toBe(200);
  });
});

const noRedis = await redisUnreachable();

describe.skipIf(noRedis !== undefined)(`paused programs through the global KV pool (Redis)${noRedis ? ` (skipped: ${noRedis})` : ""}`, () => {
  // Two engines as two processes would be: each its own client of one pool, no L3 store in common.
  const poolName = `test-${randomBytes(6).toString("hex")}`;
  const pool = () => new RedisStatePool({ url: REDIS_TEST_URL, capacityBytes: 64 * 1024 * 1024, name: poolName });
  let C: EngineServer, D: EngineServer;
  const peekPool = async (key: string) => {
    const p = pool();
    try {
      return await p.peek(key);
    } finally {
      await p.close();
    }
  };

  beforeAll(async () => {
    C = await open({ kvPool: pool() });
    D = await open({ kvPool: pool() });
  });

  it("paused to L2 on C, moved to the pool, restored on D: D loads C's state and continues exactly", async () => {
    const ref = await reference("ref-pool", "What is 5+6?");
    const t1 = await turn1(C, "p-pool", "What is 5+6?");
    const held = t1.prompt.length + t1.ids.length - 1;
    expect((await post(C, "/v1/programs/p-pool/pause", { to: "L2" })).body).toMatchObject({ paused: "L2", kv_location: "L2", kv_tokens: held });
    // The gateway moves a program it restores elsewhere: the state goes from C's L2 to the pool.
    expect((await post(C, "/v1/programs/p-pool/pause", { to: "L3" })).body).toMatchObject({ paused: "L3", kv_location: "L3", kv_tokens: held });
    expect((await peekPool("program:p-pool"))?.tokenIds.length).toBe(held);
    expect(await info(D, "p-pool")).toMatchObject({ kv_location: "none" });

    // Restoring on D makes it learn of the state; C's restore only lifts its pause.
    expect((await post(D, "/v1/programs/p-pool/restore")).body).toMatchObject({ paused: null, kv_location: "L3", kv_tokens: held });
    expect((await post(C, "/v1/programs/p-pool/restore")).body).toMatchObject({ paused: null });
    const before = runnerStats(D);
    expectSame(await turn2(D, "p-pool", t1), ref.t2);
    const after = runnerStats(D);
    expect(after.loadedStates - before.loadedStates).toBe(1);
    expect(after.loadedTokens - before.loadedTokens).toBe(held);
    expect(after.evaluatedTokens - before.evaluatedTokens).toBe(1 + TOOL.length + GEN - 1);
    // Taken out of the pool by the load: no other engine can load it a second time.
    expect(await peekPool("program:p-pool")).toBeUndefined();
  });

  it("a restore with nothing in the pool answers kv none, and the turn recomputes to the same tokens", async () => {
    const ref = await reference("ref-pool-miss", "What is 3*3?");
    const t1 = await turn1(C, "p-pool-miss", "What is 3*3?");
    expect((await post(C, "/v1/programs/p-pool-miss/pause", { to: "L2" })).body).toMatchObject({ kv_location: "L2" });
    expect((await post(D, "/v1/programs/p-pool-miss/restore")).body).toMatchObject({ kv_location: "none", kv_tokens: 0 });
    const before = runnerStats(D);
    expectSame(await turn2(D, "p-pool-miss", t1), ref.t2);
    expect(runnerStats(D).loadedStates).toBe(before.loadedStates);
    await post(C, "/v1/programs/p-pool-miss/pause", { to: "drop" });
    await post(C, "/v1/programs/p-pool-miss/restore");
  });
});
