// Test fixture: real built-in engines running the tiny policy on llama.cpp, and the gateway in
// front of one of them recording calls in memory. Shared by the tests that drive the gateway with
// real client SDKs, so each starts its engine and reads its metrics the same way.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { expect, vi } from "vitest";
import type { Backend } from "../backends/backend.js";
import { createBuiltinBackend } from "../backends/builtin.js";
import type { Call } from "../core/types.js";
import { startEngineServer, type EngineServerOptions, type ListeningEngineServer } from "../engine/server.js";
import { ensurePolicy } from "../model/policy.js";
import { createGateway, type Gateway } from "../gateway/server.js";

export interface TinyEngine {
  engine: ListeningEngineServer;
  /** Where the policy file lives (removed by close). */
  dir: string;
  close(): Promise<void>;
}

/**
 * Start an engine "e0" on a fresh tiny policy (1024-token context) in a temp dir named `prefix`:
 * 2 sequences of 1024 tokens, 8 waiting, unless `opts` says otherwise.
 */
export async function startTinyEngine(prefix: string, opts: Partial<Omit<EngineServerOptions, "modelPath">> = {}): Promise<TinyEngine> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const policy = ensurePolicy(dir, { seed: 9, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 1024 });
  const engine = await startEngineServer({ name: "e0", policyVersion: 1, sequences: 2, contextSize: 1024, maxWaiting: 8, ...opts, modelPath: policy.path });
  return {
    engine,
    dir,
    async close() {
      await engine.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface RealEngineGateway {
  engine: ListeningEngineServer;
  gateway: Gateway;
  /** Gateway origin, e.g. http://127.0.0.1:41234. */
  url: string;
  /** Every call the gateway recorded, in order. */
  calls: Call[];
  close(): Promise<void>;
}

/**
 * Start a tiny-policy engine (2 sequences, 1024 tokens) and a gateway routing to it, through
 * `backendOf(engine)` (default: the built-in backend "e0" at the engine's /v1).
 */
export async function startRealEngineGateway(
  policyVersion: number,
  backendOf: (engine: ListeningEngineServer) => Backend = (engine) => createBuiltinBackend({ name: "e0", url: `${engine.url}/v1` }),
): Promise<RealEngineGateway> {
  const tiny = await startTinyEngine("arbor-gw-engine-", { policyVersion });
  const calls: Call[] = [];
  const gateway = createGateway({ backends: [backendOf(tiny.engine)], sink: { recordCall: async (c) => void calls.push(c) } });
  const url = await gateway.listen("127.0.0.1", 0);
  return {
    engine: tiny.engine,
    gateway,
    url,
    calls,
    async close() {
      await gateway.close();
      await tiny.close();
    },
  };
}

/** What a recorded call says about its tokens (for comparing a streamed call with a plain one). */
export const traceOf = (c: Call): unknown => ({ p: c.promptTokenIds, o: c.outputTokenIds, l: c.logprobs, t: c.outputText, f: c.finishReason, v: c.policyVersion });

/** Requests the engine at `engineUrl` finished as aborted, from its /metrics. */
export async function abortedRequests(engineUrl: string): Promise<number> {
  const text = await (await fetch(`${engineUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("vllm:request_success_total") && l.includes('finished_reason="abort"'));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

/**
 * Start a long streamed chat as `client` (program `programId`), abort it after two content chunks,
 * and check the engine cancelled the request, the program is free again and nothing was recorded.
 */
export async function abortMidStream(fx: Pick<RealEngineGateway, "engine" | "gateway" | "calls">, client: OpenAI, programId: string): Promise<void> {
  const n = fx.calls.length;
  const aborts = await abortedRequests(fx.engine.url);
  const stream = await client.chat.completions.create({
    model: "arbor-tiny", messages: [{ role: "user", content: "Talk a lot." }], max_tokens: 900, temperature: 1, seed: 1, stream: true,
  });
  let seen = 0;
  for await (const chunk of stream) {
    if (chunk.choices[0]?.delta.content !== undefined) seen++;
    if (seen >= 2) {
      stream.controller.abort();
      break;
    }
  }
  await vi.waitFor(async () => expect(await abortedRequests(fx.engine.url)).toBe(aborts + 1), { timeout: 5000 });
  // Its only call failed: the program is forgotten (it holds no table slot).
  await vi.waitFor(() => expect(fx.gateway.table.get(programId)).toBeUndefined());
  expect(fx.calls.length).toBe(n);
}

/**
 * A streamed chat as `client` (program `programId`) that the engine refuses before the stream
 * starts (max_tokens past the context): the client gets the engine's 400 and nothing is recorded.
 */
export async function refusedBeforeStream(fx: Pick<RealEngineGateway, "gateway" | "calls">, client: OpenAI, programId: string): Promise<void> {
  const n = fx.calls.length;
  const err = await client.chat.completions
    // A prompt longer than the context: the engine's to refuse (a too-large max_tokens is the gateway's to clamp).
    .create({ model: "arbor-tiny", messages: [{ role: "user", content: "x".repeat(2000) }], max_tokens: 3, stream: true })
    .then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(OpenAI.APIError);
  expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
  expect(fx.calls.length).toBe(n);
  expect(fx.gateway.table.get(programId)).toBeUndefined();
}
