// ThunderAgent pausing through the gateway's HTTP surface on the real built-in engine: two agent
// programs outgrow the engine's KV, the gateway pauses one on the engine (its KV offloaded), holds
// that program's next call, and lets it go once capacity is back — a completed, recorded call.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createArborBackend } from "../../backends/vllm.js";
import { VirtualClock } from "../../core/clock.js";
import type { Call } from "../../core/types.js";
import type { ListeningEngineServer } from "../../engine/server.js";
import { renderChat } from "../../model/chat-template.js";
import { Vocab } from "../../model/vocab.js";
import { startTinyEngine, type TinyEngine } from "../../testing/real-engine-fixture.js";
import { createGateway, type Gateway } from "../server.js";

const TICK = 1000;
const MAX_TOKENS = 8;
const SYSTEM = "You are a careful calculator agent. Use the tool when you need it and answer briefly.";
const messages = (q: string) => [
  { role: "system" as const, content: SYSTEM },
  { role: "user" as const, content: q },
];

let tiny: TinyEngine;
let engine: ListeningEngineServer;
let gateway: Gateway;
let url: string;
const clock = new VirtualClock(0);
const calls: Call[] = [];

beforeAll(async () => {
  tiny = await startTinyEngine("arbor-gw-pausing-", { contextSize: 512, executorKind: "llamacpp-scheduled" });
  engine = tiny.engine;
  // Capacity for one program and a half: two programs after their first call oversubscribe it.
  const vocab = new Vocab();
  const prompt = renderChat(messages("What is 6*7?"), (t) => vocab.encode(t), vocab, { addGenerationPrompt: true }).length;
  const capacity = Math.floor(1.5 * (prompt + MAX_TOKENS));
  gateway = createGateway({
    backends: [createArborBackend({ name: "e0", url: `${engine.url}/v1` })],
    sink: { recordCall: async (c) => void calls.push(c) },
    clock,
    pausing: { enabled: true, tickMs: TICK, bufferPerProgram: 0, decayScope: "off", capacities: { e0: capacity } },
  });
  url = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
  await tiny?.close();
});

const client = (programId: string) => new OpenAI({ baseURL: `${url}/p/${programId}/v1`, apiKey: "unused", maxRetries: 0 });
const ask = (programId: string, q: string) =>
  client(programId).chat.completions.create({ model: "arbor-tiny", messages: messages(q), max_tokens: MAX_TOKENS, temperature: 0.9, seed: 3 });

async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split("\n").find((l) => l.startsWith(name) && !l.startsWith(`${name}_`) && want.every((w) => l.includes(w)));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

async function enginePaused(programId: string): Promise<string | null> {
  const res = await fetch(`${engine.url}/v1/programs/${programId}`);
  if (res.status === 404) return null;
  return ((await res.json()) as { paused: string | null }).paused;
}

async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 5000; i++) {
    if (await check()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error("condition not reached");
}

describe("gateway with pausing on the real built-in engine", () => {
  it("pauses one program on the engine, holds its next call, and serves it after capacity returns", async () => {
    await ask("a", "What is 6*7?");
    await ask("b", "What is 12+30?");
    clock.advance(TICK);
    await until(async () => (await metric("arbor_gateway_pauses_total", { mode: "engine" })) === 1);
    const pausedA = await enginePaused("a");
    const pausedB = await enginePaused("b");
    // Exactly one program was paused, and its KV sits in the engine's host tier.
    expect([pausedA, pausedB].filter((p) => p === "L2")).toHaveLength(1);
    const paused = pausedA === "L2" ? "a" : "b";
    const other = paused === "a" ? "b" : "a";

    let answered = false;
    const held = ask(paused, "And then?").then((r) => {
      answered = true;
      return r;
    });
    await until(async () => (await metric("arbor_gateway_held_calls")) === 1);
    expect(answered).toBe(false);
    expect(calls.filter((c) => c.programId === paused)).toHaveLength(1);

    // The other program ends: its KV is freed, and the next tick restores the paused one.
    expect((await fetch(`${url}/programs/${other}/release`, { method: "POST" })).status).toBe(200);
    clock.advance(TICK);
    const res = await held;
    expect(res.choices[0]!.message).toBeDefined();
    expect(calls.filter((c) => c.programId === paused).map((c) => c.index)).toEqual([0, 1]);
    expect(await enginePaused(paused)).toBeNull();
    expect(await metric("arbor_gateway_restores_total", { mode: "engine" })).toBe(1);
    expect(await metric("arbor_gateway_recompute_avoided_tokens_total")).toBeGreaterThan(0);
    expect(await metric("arbor_gateway_held_calls")).toBe(0);
  });
});
