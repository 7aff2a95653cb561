// PauseGate against the real built-in engine (tiny policy on llama.cpp, scheduled executor): the
// gate's pause really offloads the program's KV on the engine, and the call it held continues with
// exactly the tokens of an unpaused run, from the reloaded KV rather than a re-prefill. With two
// engines sharing the global KV pool (Redis), a program restored on the other engine has its KV moved.
import { randomBytes } from "node:crypto";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GenerateResult, TokenBackend } from "../../backends/backend.js";
import { createArborBackend } from "../../backends/vllm.js";
import { VirtualClock } from "../../core/clock.js";
import type { LlamaCppStepRunner } from "../../engine/core/llamacpp-step-runner.js";
import type { ScheduledExecutor } from "../../engine/core/scheduled-executor.js";
import { RedisStatePool } from "../../engine/kv/redis-state-pool.js";
import { startEngineServer, type ListeningEngineServer } from "../../engine/server.js";
import { renderChat, stopTokenIds } from "../../model/chat-template.js";
import { ensurePolicy } from "../../model/policy.js";
import { Vocab } from "../../model/vocab.js";
import { REDIS_TEST_URL, redisUnreachable } from "../../testing/redis-test.js";
import { startTinyEngine, type TinyEngine } from "../../testing/real-engine-fixture.js";
import { PauseGate } from "./pause-gate.js";

const vocab = new Vocab();
const encode = (t: string): number[] => vocab.encode(t);
const PROMPT = renderChat(
  [
    { role: "system", content: "You are a calculator." },
    { role: "user", content: "What is 6*7?" },
  ],
  encode,
  vocab,
);
/** The tool result appended for turn 2 (without the leading BOS of a fresh render). */
const TOOL = renderChat([{ role: "tool", content: "result: 42" }], encode, vocab).slice(1);
const GEN = 8;
const TICK = 1000;

let tiny: TinyEngine;
let engine: ListeningEngineServer;
let backend: TokenBackend;

beforeAll(async () => {
  tiny = await startTinyEngine("arbor-pause-gate-", { contextSize: 256, executorKind: "llamacpp-scheduled" });
  engine = tiny.engine;
  backend = createArborBackend({ name: "e0", url: `${engine.url}/v1` });
});

afterAll(async () => {
  await tiny?.close();
});

const gen = (programId: string, prompt: number[], seed: number): Promise<GenerateResult> =>
  backend.generate({ promptTokenIds: prompt, maxTokens: GEN, temperature: 0.9, seed, stopTokenIds: stopTokenIds(vocab), programId });

/** The engine's view of a program (GET /v1/programs/:id). */
async function engineInfo(id: string): Promise<{ paused: string | null; kv_location: string; kv_tokens: number; held_requests: number }> {
  const res = await fetch(`${engine.url}/v1/programs/${id}`);
  expect(res.status).toBe(200);
  return (await res.json()) as { paused: string | null; kv_location: string; kv_tokens: number; held_requests: number };
}

/** Yield to the event loop until `check` holds (engine HTTP calls run on real sockets). */
async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (await check()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error("condition not reached");
}

const runnerStats = (e: ListeningEngineServer = engine) => ((e.executor as ScheduledExecutor).runner as LlamaCppStepRunner).stats();

/** A metric series' value (0 when absent). */
async function metricOf(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
  return m?.values.find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value ?? 0;
}

describe("PauseGate on the real built-in engine", () => {
  it("pauses a program's KV on the engine, holds its call, and continues it exactly after restore", async () => {
    const clock = new VirtualClock(0);
    const registry = new Registry();
    const gate = await PauseGate.create({ backends: [backend], clock, registry, config: { tickMs: TICK, bufferPerProgram: 0, decayScope: "off" } });
    const capacity = gate.controller.usage()[0]!.capacity;
    // The engine's own KV geometry (vllm:cache_config_info): sequences x context at most.
    expect(capacity).toBeGreaterThan(0);
    expect(capacity).toBeLessThanOrEqual(2 * 256);
    const metric = (name: string, labels: Record<string, string> = {}) => metricOf(registry, name, labels);

    expect(await gate.beforeCall("p", PROMPT.length)).toBe("e0");
    const t1 = await gen("p", PROMPT, 7);
    const total1 = PROMPT.length + t1.outputTokenIds.length;
    gate.afterCall("p", total1);

    // Pretend the engine is full: the next tick pauses p (acting), on the engine.
    gate.controller.setCapacity("e0", total1 - 1);
    clock.advance(TICK);
    // The engine answers the pause once the KV is saved; the gate counts it then.
    await until(async () => (await metric("arbor_gateway_pauses_total", { backend: "e0", mode: "engine" })) === 1);
    // The context of turn 1 (its last sampled token was never fed) sits in the engine's L2.
    expect(await engineInfo("p")).toMatchObject({ paused: "L2", kv_location: "L2", kv_tokens: total1 - 1 });

    const prompt2 = [...PROMPT, ...t1.outputTokenIds, ...TOOL];
    let released: string | undefined;
    const held = gate.beforeCall("p", prompt2.length).then((b) => (released = b));
    await until(async () => gate.heldCalls === 1);
    // Held at the gateway, not at the engine.
    expect(released).toBeUndefined();
    expect(await engineInfo("p")).toMatchObject({ paused: "L2", held_requests: 0 });

    gate.controller.setCapacity("e0", capacity);
    clock.advance(TICK);
    expect(await held).toBe("e0");
    expect((await engineInfo("p")).paused).toBeNull();

    const before = runnerStats();
    const t2 = await gen("p", prompt2, 8);
    gate.afterCall("p", prompt2.length + t2.outputTokenIds.length);
    // Turn 2 started from the reloaded KV: nothing of turn 1 was recomputed.
    const after = runnerStats();
    expect(after.loadedStates - before.loadedStates).toBe(1);
    expect(after.loadedTokens - before.loadedTokens).toBe(total1 - 1);
    expect(after.recomputedTokens - before.recomputedTokens).toBe(0);

    // Reference: the same two turns, never paused (run last, so its prefix-cache blocks cannot
    // stand in for p's reloaded state above).
    const r1 = await gen("ref", PROMPT, 7);
    const r2 = await gen("ref", [...PROMPT, ...r1.outputTokenIds, ...TOOL], 8);
    expect(t1.outputTokenIds).toEqual(r1.outputTokenIds);
    expect(t2.promptTokenIds).toEqual([...PROMPT, ...r1.outputTokenIds, ...TOOL]);
    expect(t2.outputTokenIds).toEqual(r2.outputTokenIds);
    t2.logprobs.forEach((lp, i) => expect(Math.abs(lp - r2.logprobs[i]!)).toBeLessThan(1e-6));

    expect(await metric("arbor_gateway_pauses_total", { backend: "e0", mode: "engine" })).toBe(1);
    expect(await metric("arbor_gateway_restores_total", { backend: "e0", mode: "engine" })).toBe(1);
    expect(await metric("arbor_gateway_recompute_avoided_tokens_total")).toBe(total1);
    expect(await metric("arbor_gateway_pause_engine_failures_total")).toBe(0);
    gate.onRelease("p");
    await gate.close();
  });

  it("marks a program whose call is running, pauses it on the engine when the call returns, and lets it go on release", async () => {
    const clock = new VirtualClock(0);
    const registry = new Registry();
    const gate = await PauseGate.create({ backends: [backend], clock, registry, config: { tickMs: TICK, bufferPerProgram: 0, decayScope: "off" } });
    const pauses = async (): Promise<number> =>
      (await registry.getMetricsAsJSON()).find((x) => x.name === "arbor_gateway_pauses_total")?.values.find((v) => v.labels.mode === "engine")?.value ?? 0;

    expect(await gate.beforeCall("m", PROMPT.length)).toBe("e0");
    const running = gen("m", PROMPT, 3);
    // Over capacity while m's call is out: m is only marked, the engine is not asked yet.
    gate.controller.setCapacity("e0", PROMPT.length - 1);
    clock.advance(TICK);
    expect(gate.controller.get("m")).toMatchObject({ state: "active", markedForPause: true });
    const t1 = await running;
    expect(await pauses()).toBe(0);
    expect((await engineInfo("m")).paused).toBeNull();

    const total = PROMPT.length + t1.outputTokenIds.length;
    gate.afterCall("m", total);
    expect(gate.controller.get("m")).toMatchObject({ state: "paused", originBackend: "e0" });
    await until(async () => (await pauses()) === 1);
    expect(await engineInfo("m")).toMatchObject({ paused: "L2", kv_location: "L2", kv_tokens: total - 1 });

    // The program ends while paused: the engine is told to stop holding it.
    gate.onRelease("m");
    await until(async () => (await engineInfo("m")).paused === null);
    expect(gate.controller.get("m")).toBeUndefined();
    await gate.close();
  });
});

const noRedis = await redisUnreachable();

describe.skipIf(noRedis !== undefined)(`PauseGate on two real engines sharing the KV pool${noRedis ? ` (skipped: ${noRedis})` : ""}`, () => {
  it("restores a program paused on one engine onto the other, which loads its KV from the pool and continues exactly", async () => {
    // Same GGUF path for both: a state loads only into the engine shape it came from.
    const policy = ensurePolicy(tiny.dir, { seed: 9, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 1024 });
    const name = `test-${randomBytes(6).toString("hex")}`;
    const open = (n: string) =>
      startEngineServer({
        name: n,
        modelPath: policy.path,
        policyVersion: 1,
        sequences: 2,
        contextSize: 256,
        maxWaiting: 8,
        executorKind: "llamacpp-scheduled",
        kvPool: new RedisStatePool({ url: REDIS_TEST_URL, capacityBytes: 64 * 1024 * 1024, name }),
      });
    const [x, y] = [await open("x"), await open("y")];
    try {
      const bx = createArborBackend({ name: "x", url: `${x.url}/v1` });
      const by = createArborBackend({ name: "y", url: `${y.url}/v1` });
      const clock = new VirtualClock(0);
      const registry = new Registry();
      const gate = await PauseGate.create({ backends: [bx, by], clock, registry, config: { tickMs: TICK, bufferPerProgram: 0, decayScope: "off" } });
      const genOn = (b: TokenBackend, prompt: number[], seed: number) =>
        b.generate({ promptTokenIds: prompt, maxTokens: GEN, temperature: 0.9, seed, stopTokenIds: stopTokenIds(vocab), programId: "mv" });

      expect(await gate.beforeCall("mv", PROMPT.length, undefined, "x")).toBe("x");
      const t1 = await genOn(bx, PROMPT, 7);
      const total1 = PROMPT.length + t1.outputTokenIds.length;
      gate.afterCall("mv", total1);
      // x is full: mv is paused on x; its next call can only go to y.
      gate.controller.setCapacity("x", total1 - 1);
      clock.advance(TICK);
      await until(async () => (await metricOf(registry, "arbor_gateway_pauses_total", { backend: "x", mode: "engine" })) === 1);

      const prompt2 = [...PROMPT, ...t1.outputTokenIds, ...TOOL];
      const held = gate.beforeCall("mv", prompt2.length, undefined, "x");
      clock.advance(TICK);
      expect(await held).toBe("y");
      expect(await metricOf(registry, "arbor_gateway_kv_moves_total", { from: "x", to: "y" })).toBe(1);
      expect(await metricOf(registry, "arbor_gateway_restores_total", { backend: "y", mode: "engine" })).toBe(1);

      const before = runnerStats(y);
      const t2 = await genOn(by, prompt2, 8);
      const after = runnerStats(y);
      expect(after.loadedStates - before.loadedStates).toBe(1);
      expect(after.loadedTokens - before.loadedTokens).toBe(total1 - 1);
      expect(after.recomputedTokens - before.recomputedTokens).toBe(0);
      // The same turns never paused, on the engine the program started on.
      const r1 = await gen("ref-mv", PROMPT, 7);
      const r2 = await gen("ref-mv", [...PROMPT, ...r1.outputTokenIds, ...TOOL], 8);
      expect(t1.outputTokenIds).toEqual(r1.outputTokenIds);
      expect(t2.outputTokenIds).toEqual(r2.outputTokenIds);
      t2.logprobs.forEach((lp, i) => expect(Math.abs(lp - r2.logprobs[i]!)).toBeLessThan(1e-6));
      gate.onRelease("mv");
      await gate.close();
    } finally {
      await x.close();
      await y.close();
    }
  });
});
