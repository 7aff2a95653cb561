// Test support for the agent SDK: the real engine HTTP surface (a scripted executor stands in for
// the policy, which is untrained and never calls tools), the real gateway with program keys, and
// a real SQLite store recording every call with its exact token ids.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { createBuiltinBackend } from "../backends/builtin.js";
import type { Termination } from "../core/types.js";
import type { Executor, GenerateRequest, GenerateResult } from "../engine/executor.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { createGateway, type Gateway } from "../gateway/server.js";
import { Vocab } from "../model/vocab.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../model/markup.js";

export const vocab = new Vocab();
export const ADMIN_TOKEN = "agents-test-admin-token-0123";
const END = vocab.controlId("<|end|>");

/** Token ids of `text`, with the tool-call markers as their control tokens (as the policy emits them). */
export function encodeWithControls(text: string): number[] {
  return text
    .split(/(<\|tool_call\|>|<\|\/tool_call\|>)/)
    .flatMap((part) => (part === TOOL_CALL_OPEN || part === TOOL_CALL_CLOSE ? [vocab.controlId(part)] : vocab.encode(part)));
}

/** Decides the answer text from the rendered prompt (control tokens shown as text). */
export type Script = (prompt: string) => string;

/** An executor that answers by script; it honours max_tokens like a real one. */
export class ScriptedExecutor implements Executor {
  readonly vocabSize = vocab.size;
  readonly sequences = 4;
  /** Every output it produced, in order (token ids), to compare with what the store recorded. */
  readonly outputs: number[][] = [];

  constructor(
    private readonly script: Script,
    readonly contextSize = 4096,
  ) {}

  tokenize(text: string): number[] {
    return vocab.encode(text);
  }

  async generate(req: GenerateRequest): Promise<GenerateResult> {
    const ids = [...encodeWithControls(this.script(vocab.decode([...req.promptTokenIds]))), END];
    const kept = ids.slice(0, req.maxTokens);
    this.outputs.push(kept);
    const stopped = kept.length === ids.length;
    return {
      tokens: kept.map((id, i) => ({ id, logprob: -0.125 - i / 1024, top: [] })),
      finishReason: stopped ? "stop" : "length",
      ...(stopped ? { stopTokenId: END } : {}),
    };
  }

  stats() {
    return { running: 0, waiting: 0, usedTokens: 0, totalTokens: this.contextSize };
  }

  async close(): Promise<void> {}
}

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
  const executor = new ScriptedExecutor(script, opts.contextSize ?? 4096);
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
