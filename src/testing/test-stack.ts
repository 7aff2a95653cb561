// Test support for the agent SDK: the real engine HTTP surface (a ScriptedExecutor stands in for
// the policy, which is untrained and never calls tools), the real gateway with program keys, and
// a real SQLite store recording every call with its exact token ids.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { createBuiltinBackend } from "../backends/builtin.js";
import type { Termination } from "../core/types.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { createGateway, type Gateway } from "../gateway/server.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { ScriptedExecutor } from "./scripted-executor.js";

export const ADMIN_TOKEN = "agents-test-admin-token-0123";

/** Decides the answer text from the rendered prompt (control tokens shown as text). */
export type Script = (prompt: string) => string;

export interface TestStack {
  executor: ScriptedExecutor;
  store: SqliteTrajectoryStore;
  gatewayUrl: string;
  /** The engine's origin (its /metrics count the requests it served). */
  engineUrl: string;
  /** Create a program at the gateway (which creates its stored row); returns a client on its endpoint with its key. */
  program(id: string): Promise<OpenAI>;
  /** Create a program at the gateway (which creates its stored row); returns its key. */
  register(id: string): Promise<string>;
  /** End a program at the gateway (which ends its stored row) with `termination`. */
  end(id: string, termination: Termination): Promise<void>;
  close(): Promise<void>;
}

/** Start engine + gateway + store for one test file. */
export async function startTestStack(script: Script, opts: { contextSize?: number; auth?: boolean } = {}): Promise<TestStack> {
  const dir = mkdtempSync(join(tmpdir(), "arbor-agents-"));
  const executor = new ScriptedExecutor(script, { contextSize: opts.contextSize ?? 4096, sequences: 4 });
  const engine: ListeningEngineServer = await startEngineServer({
    name: "scripted",
    modelPath: "",
    policyVersion: 7,
    sequences: 4,
    contextSize: executor.contextSize,
    maxWaiting: 16,
    executor,
  });
  const store = new SqliteTrajectoryStore(join(dir, "store.sqlite"), { synchronous: "normal" });
  await store.createRun({ id: "run", name: "agents", configJson: "{}", startedAt: 0 });
  const gateway: Gateway = createGateway({
    backends: [createBuiltinBackend({ name: "scripted", url: `${engine.url}/v1` })],
    store,
    runId: "run",
    ...(opts.auth === false ? {} : { auth: { adminToken: ADMIN_TOKEN, requireProgramKeys: true } }),
  });
  const gatewayUrl = await gateway.listen("127.0.0.1", 0);
  const register = async (id: string): Promise<string> => {
    await store.createGroup({ id: `g-${id}`, runId: "run", taskId: "task", programIds: [id] });
    // The gateway creates the program's row (it owns the program) and issues its key.
    return createProgramKey(gatewayUrl, id, { group_id: `g-${id}`, task_id: "task" });
  };
  return {
    executor,
    store,
    gatewayUrl,
    engineUrl: engine.url,
    register,
    async program(id) {
      const apiKey = await register(id);
      return new OpenAI({ baseURL: `${gatewayUrl}/p/${encodeURIComponent(id)}/v1`, apiKey, maxRetries: 0 });
    },
    async end(id, termination) {
      const res = await fetch(`${gatewayUrl}/programs/${encodeURIComponent(id)}/release`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_TOKEN}` },
        body: JSON.stringify({ termination }),
      });
      if (res.status !== 200) throw new Error(`gateway could not end program ${id}: ${res.status} ${await res.text()}`);
    },
    async close() {
      await gateway.close();
      await engine.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** POST /programs with the admin token (and where the program goes in the store, if given); the program's key. */
export async function createProgramKey(gatewayUrl: string, id: string, place: Record<string, unknown> = {}): Promise<string> {
  const res = await fetch(`${gatewayUrl}/programs`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_TOKEN}` },
    body: JSON.stringify({ id, ...place }),
  });
  const body = (await res.json()) as { api_key?: string };
  if (res.status !== 201 || typeof body.api_key !== "string") throw new Error(`gateway refused program ${id}: ${res.status}`);
  return body.api_key;
}
