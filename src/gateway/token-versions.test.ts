// Per-token policy versions end to end: the built-in engine switches weights mid-call with
// `in_flight: resume`, the gateway records which version made each token, the SQLite store keeps
// them across a reopen and the batch samples carry them token by token.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { Backend } from "../backends/backend.js";
import { createBuiltinBackend } from "../backends/builtin.js";
import { createArborBackend } from "../backends/vllm.js";
import { buildSampleSet } from "../batch/trajectory-samples.js";
import type { Call } from "../core/types.js";
import { gatedExecutor, step, type GatedExecutor } from "../testing/engine-http-helpers.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { Vocab } from "../model/vocab.js";
import { callVersionSpans } from "../rollout/async-rollout-versions.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import { createGateway, type Gateway } from "./server.js";

const vocab = new Vocab();
const A = vocab.encode("a")[0]!;
const B = vocab.encode("b")[0]!;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "arbor-token-versions-"));
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Setup {
  a: GatedExecutor;
  b: GatedExecutor;
  engine: ListeningEngineServer;
  gateway: Gateway;
  url: string;
  calls: Call[];
}

let current: Setup | undefined;
afterEach(async () => {
  await current?.gateway.close();
  await current?.engine.close();
  current = undefined;
});

/** An engine on gated executors (version 1 = "a", version 2 = "b") resuming in-flight requests on a switch, and a gateway before it. */
async function setup(backendOf: (engineUrl: string) => Backend): Promise<Setup> {
  const a = gatedExecutor("a");
  const b = gatedExecutor("b");
  const engine = await startEngineServer({
    name: "e0",
    modelPath: "/a.gguf",
    policyVersion: 1,
    sequences: 2,
    contextSize: 128,
    maxWaiting: 4,
    executor: a,
    loadExecutor: async (path) => {
      if (path === "/b.gguf") return b;
      throw new Error(`no such file ${path}`);
    },
    inFlightOnWeightSwitch: "resume",
  });
  const calls: Call[] = [];
  const gateway = createGateway({ backends: [backendOf(`${engine.url}/v1`)], sink: { recordCall: async (c) => void calls.push(c) } });
  const url = await gateway.listen("127.0.0.1", 0);
  current = { a, b, engine, gateway, url, calls };
  return current;
}

/** Send `body` to the gateway for `program`, let "a" make 2 tokens, switch the engine to version 2, let "b" make 3; the recorded call. */
async function callAcrossSwitch(s: Setup, program: string, body: object): Promise<{ call: Call; text: string }> {
  const reply = fetch(`${s.url}/p/${program}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "arbor-tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 5, temperature: 0.7, ...body }),
  });
  await vi.waitFor(() => expect(s.a.running).toBe(1), { timeout: 10_000, interval: 1 });
  await step(s.a);
  await step(s.a);
  const load = await fetch(`${s.engine.url}/v1/load_weights`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model_path: "/b.gguf", policy_version: 2, in_flight: "resume" }),
  });
  expect(await load.json()).toMatchObject({ in_flight: "resume", in_flight_requests: 1 });
  await vi.waitFor(() => expect(s.b.running).toBe(1), { timeout: 10_000, interval: 1 });
  for (let i = 0; i < 3; i++) await step(s.b);
  const res = await reply;
  const text = await res.text();
  expect(res.status, text).toBe(200);
  const call = s.calls.filter((c) => c.programId === program).at(-1);
  expect(call).toBeDefined();
  return { call: call!, text };
}

describe("per-token policy versions through the gateway", () => {
  it("token path: the recorded call says the first tokens came from version 1 and the rest from 2", async () => {
    const s = await setup((url) => createArborBackend({ name: "e0", url }));
    const { call } = await callAcrossSwitch(s, "tv-a", {});
    expect(call.outputTokenIds).toEqual([A, A, B, B, B]);
    expect(call.policyVersion).toBe(2);
    expect(call.tokenPolicyVersions).toEqual([1, 1, 2, 2, 2]);

    // The store keeps them across a reopen, and the batch samples and version spans read them per token.
    const path = join(dir, "tv-a.sqlite");
    const store = new SqliteTrajectoryStore(path);
    const group = { ...fixtureGroup("g", "run-1", 1), programIds: [call.programId] };
    await store.createRun(fixtureRun());
    await store.createGroup(group);
    await store.createProgram({ ...fixtureProgram(group, 0), id: call.programId });
    await store.recordCall(call);
    await store.endProgram(call.programId, { kind: "completed" }, 3000);
    await store.setReward(call.programId, { total: 1, components: {} });
    await store.close();
    const reopened = new SqliteTrajectoryStore(path);
    try {
      const t = (await reopened.getTrajectory(call.programId))!;
      expect(t.calls).toEqual([call]);
      const { samples } = buildSampleSet([t], await reopened.listGroups("run-1"));
      const versions = samples[0]!.versions.filter((_, i) => samples[0]!.lossMask[i] === 1);
      expect(versions).toEqual([1, 1, 2, 2, 2]);
      expect(callVersionSpans(t.calls, 1)).toEqual({ spans: [{ version: 0, tokens: 2 }, { version: 1, tokens: 3 }], inverted: 0 });
    } finally {
      await reopened.close();
    }
  });

  it("streamed token path: each chunk's version becomes its tokens' versions", async () => {
    const s = await setup((url) => createArborBackend({ name: "e0", url }));
    const { call, text } = await callAcrossSwitch(s, "tv-b", { stream: true });
    expect(text.trim().endsWith("data: [DONE]")).toBe(true);
    expect(call.outputTokenIds).toEqual([A, A, B, B, B]);
    expect(call.tokenPolicyVersions).toEqual([1, 1, 2, 2, 2]);
  });

  it("passthrough: the engine's token_policy_versions are recorded as they are", async () => {
    const s = await setup((url) => createBuiltinBackend({ name: "e0", url }));
    const { call } = await callAcrossSwitch(s, "tv-c", {});
    expect(call.outputTokenIds).toEqual([A, A, B, B, B]);
    expect(call.policyVersion).toBe(2);
    expect(call.tokenPolicyVersions).toEqual([1, 1, 2, 2, 2]);
  });

  it("a call on one version records no per-token list (all at policyVersion)", async () => {
    const s = await setup((url) => createArborBackend({ name: "e0", url }));
    const reply = fetch(`${s.url}/p/tv-d/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "arbor-tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
    });
    await vi.waitFor(() => expect(s.a.running).toBe(1), { timeout: 10_000, interval: 1 });
    await step(s.a);
    await step(s.a);
    expect((await reply).status).toBe(200);
    const call = s.calls.at(-1)!;
    expect(call.policyVersion).toBe(1);
    expect("tokenPolicyVersions" in call).toBe(false);
  });
});
