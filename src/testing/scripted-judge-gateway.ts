// Test fixture: the real gateway (with credentials) in front of real built-in engine servers whose
// executor answers with scripted text instead of the untrained tiny policy, so judge tests get
// deterministic votes while every request still goes client → gateway → engine over HTTP.
import { createBuiltinBackend } from "../backends/builtin.js";
import type { Call } from "../core/types.js";
import type { Executor, GenerateRequest, GenerateResult } from "../engine/executor.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { createGateway, type Gateway } from "../gateway/server.js";
import { Vocab } from "../model/vocab.js";

const vocab = new Vocab();

/** Answers each generation with `answer(prompt text)`. */
class ScriptedExecutor implements Executor {
  readonly vocabSize = vocab.size;
  readonly contextSize = 8192;
  readonly sequences = 4;
  constructor(private readonly answer: (prompt: string) => string) {}
  tokenize(text: string): number[] {
    return vocab.encode(text);
  }
  async generate(req: GenerateRequest): Promise<GenerateResult> {
    const ids = [...vocab.encode(this.answer(vocab.decode([...req.promptTokenIds]))), vocab.controlId("<|end|>")];
    return { tokens: ids.map((id) => ({ id, logprob: -0.5, top: [] })), finishReason: "stop", stopTokenId: vocab.controlId("<|end|>") };
  }
  stats() {
    return { running: 0, waiting: 0, usedTokens: 0, totalTokens: 8192 };
  }
  async close(): Promise<void> {}
}

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
export async function startScriptedJudgeGateway(model: string, answer: (prompt: string) => string): Promise<ScriptedJudgeGateway> {
  const engine: ListeningEngineServer = await startEngineServer({
    name: model,
    servedModelName: model,
    modelPath: "",
    policyVersion: 0,
    sequences: 4,
    contextSize: 8192,
    maxWaiting: 64,
    executor: new ScriptedExecutor(answer),
  });
  const calls: Call[] = [];
  let gateway: Gateway;
  try {
    gateway = createGateway({
      backends: [createBuiltinBackend({ name: model, url: `${engine.url}/v1` })],
      sink: { recordCall: async (c) => void calls.push(c) },
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
