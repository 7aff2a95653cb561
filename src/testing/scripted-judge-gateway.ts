// Test fixture: the real gateway (with credentials) in front of real built-in engine servers whose
// executor answers with scripted text instead of the untrained tiny policy, so judge tests get
// deterministic votes while every request still goes client → gateway → engine over HTTP.
import { createBuiltinBackend } from "../backends/builtin.js";
import type { Call } from "../core/types.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { createGateway, type Gateway } from "../gateway/server.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";
import { ScriptedExecutor } from "./scripted-executor.js";

export interface ScriptedJudgeGateway {
  url: string;
  adminToken: string;
  /** Every call the gateway recorded. */
  calls: Call[];
  close(): Promise<void>;
}

export const JUDGE_ADMIN_TOKEN = "judge-admin-token-0123456789";

/**
 * Start one scripted engine serving `model` and a gateway (admin token {@link JUDGE_ADMIN_TOKEN})
 * in front of it. The gateway does not route by model name, so each judge model gets its own.
 */
export async function startScriptedJudgeGateway(
  model: string,
  answer: (prompt: string) => string,
  /** `store`: record into it as a deployment's gateway does (no default run: programs need a run_id); `calls` stays empty. */
  o: { store?: TrajectoryStore } = {},
): Promise<ScriptedJudgeGateway> {
  const engine: ListeningEngineServer = await startEngineServer({
    name: model,
    servedModelName: model,
    modelPath: "",
    policyVersion: 0,
    sequences: 4,
    contextSize: 8192,
    maxWaiting: 64,
    executor: new ScriptedExecutor(answer, { contextSize: 8192, sequences: 4 }),
  });
  const calls: Call[] = [];
  let gateway: Gateway;
  try {
    gateway = createGateway({
      backends: [createBuiltinBackend({ name: model, url: `${engine.url}/v1` })],
      ...(o.store ? { store: o.store } : { sink: { recordCall: async (c: Call) => void calls.push(c) } }),
      auth: { adminToken: JUDGE_ADMIN_TOKEN, requireProgramKeys: true },
    });
  } catch (e) {
    await engine.close();
    throw e;
  }
  const url = await gateway.listen("127.0.0.1", 0);
  return {
    url,
    adminToken: JUDGE_ADMIN_TOKEN,
    calls,
    async close() {
      await gateway.close();
      await engine.close();
    },
  };
}
