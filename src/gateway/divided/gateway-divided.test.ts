// Divided rollout through the gateway (config `dividedRollout`): an agent's chat call is generated
// in chunks spread over two real built-in engines, and with a fixed seed the client gets — and the
// trace records — the same tokens as through a gateway that generates in one piece.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createArborBackend } from "../../backends/vllm.js";
import type { Call } from "../../core/types.js";
import { startEngineServer, type ListeningEngineServer } from "../../engine/server.js";
import { ensurePolicy } from "../../model/policy.js";
import { createGateway, type Gateway } from "../server.js";

let dir: string;
let engines: ListeningEngineServer[] = [];
const gateways: Gateway[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-gw-divided-"));
  const policy = ensurePolicy(dir, { seed: 9, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 1024 });
  const shape = { modelPath: policy.path, policyVersion: 1, sequences: 2, contextSize: 1024, maxWaiting: 8 };
  engines = [await startEngineServer({ name: "e0", ...shape }), await startEngineServer({ name: "e1", ...shape, executorKind: "llamacpp-scheduled" })];
}, 60_000);

afterAll(async () => {
  for (const g of gateways) await g.close();
  for (const e of engines) await e.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function gatewayWith(divided: { chunkTokens: number } | undefined): Promise<{ url: string; calls: Call[] }> {
  const calls: Call[] = [];
  const g = createGateway({
    backends: engines.map((e, i) => createArborBackend({ name: `e${i}`, url: `${e.url}/v1` })),
    sink: { recordCall: async (c) => void calls.push(c) },
    ...(divided ? { dividedRollout: divided } : {}),
  });
  gateways.push(g);
  return { url: await g.listen("127.0.0.1", 0), calls };
}

describe("gateway with divided rollout", () => {
  it("gives the same seeded answer in chunks of 3 as in one piece, recorded once with the engine's ids", async () => {
    const whole = await gatewayWith(undefined);
    const chunked = await gatewayWith({ chunkTokens: 3 });
    const ask = (url: string) =>
      new OpenAI({ baseURL: `${url}/p/prog/v1`, apiKey: "unused", maxRetries: 0 }).chat.completions.create({
        model: "arbor-tiny",
        messages: [{ role: "user", content: "What is 3+4?" }],
        max_tokens: 20,
        temperature: 0.9,
        seed: 11,
      });
    const a = await ask(whole.url);
    const b = await ask(chunked.url);
    expect(b.choices[0]!.message.content).toBe(a.choices[0]!.message.content);
    expect(chunked.calls).toHaveLength(1);
    const [ca, cb] = [whole.calls[0]!, chunked.calls[0]!];
    expect(cb.promptTokenIds).toEqual(ca.promptTokenIds);
    expect(cb.outputTokenIds).toEqual(ca.outputTokenIds);
    // More than one chunk was needed for this answer.
    expect(cb.outputTokenIds.length).toBeGreaterThan(3);
    cb.logprobs.forEach((lp, i) => expect(Math.abs(lp - ca.logprobs[i]!)).toBeLessThan(1e-5));
  });
});
