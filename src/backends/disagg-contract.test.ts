// The backend contract for the disaggregated backend over live Arbor engines in the prefill and
// decode roles (models/calc-sft.gguf, the Redis KV pool): every token-level call is split, and the
// answer must equal, exactly, a mixed engine's computing the same prompt afresh.
import { randomBytes } from "node:crypto";
import { RedisStatePool } from "../engine/kv/redis-state-pool.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { REDIS_TEST_URL, redisUnreachable } from "../testing/redis-test.js";
import { describeBackendContract } from "./backend.contract.js";
import { createDisaggBackend } from "./disagg-backend.js";
import { createArborBackend } from "./vllm.js";
import { describe, it } from "vitest";

const unreachable = await redisUnreachable();

if (unreachable) {
  describe("backend contract: disagg (live prefill and decode engines)", () => {
    it.skip(`skipped: ${unreachable}`, () => undefined);
  });
} else {
  describeBackendContract("disagg (live prefill and decode engines)", async () => {
    const name = `test-${randomBytes(6).toString("hex")}`;
    const pool = () => new RedisStatePool({ url: REDIS_TEST_URL, capacityBytes: 16 * 1024 * 1024, name });
    const common = { modelPath: "models/calc-sft.gguf", policyVersion: 0, sequences: 2, contextSize: 256, maxWaiting: 4, executorKind: "llamacpp-scheduled" } as const;
    const engines: ListeningEngineServer[] = [];
    const start = async (n: string, extra: object) => {
      const e = await startEngineServer({ ...common, name: n, ...extra });
      engines.push(e);
      return e;
    };
    const p = await start("p0", { role: "prefill", kvPool: pool() });
    const d = await start("d0", { role: "decode", kvPool: pool() });
    // The reference: a mixed engine that has seen nothing else, so it computes the prompt whole.
    const reference = await start("ref", {});
    const ref = createArborBackend({ name: "ref", url: `${reference.url}/v1` });
    const chat = { messages: [{ role: "user" as const, content: "What is 2+3?" }], addGenerationPrompt: true };
    const prompt = (await ref.tokenize!(chat)).tokens;
    const want = await ref.generate({ promptTokenIds: prompt, maxTokens: 8, temperature: 1, seed: 7 });
    const stopAt = Math.min(2, want.outputTokenIds.length - 1);
    const detok = await ref.detokenize!(want.outputTokenIds);
    await reference.close();
    const make = (prefillUrl: string, decodeUrl: string) =>
      createDisaggBackend({ name: "pd", prefill: [createArborBackend({ name: "p0", url: prefillUrl })], decode: [createArborBackend({ name: "d0", url: decodeUrl })] });
    return {
      backend: make(`${p.url}/v1`, `${d.url}/v1`),
      makeBackend: (url) => make(url, url),
      capabilities: { tokenIds: true, logprobs: true, pauseRestore: false },
      cases: [
        { label: "seeded sample equals a fresh mixed engine's", req: { promptTokenIds: prompt, maxTokens: 8, temperature: 1, seed: 7 }, expected: want },
        {
          label: "stop token cuts the same sample",
          req: { promptTokenIds: prompt, maxTokens: 8, temperature: 1, seed: 7, stopTokenIds: [want.outputTokenIds[stopAt]!] },
          expected: { ...want, outputTokenIds: want.outputTokenIds.slice(0, stopAt + 1), logprobs: want.logprobs.slice(0, stopAt + 1), finishReason: "stop" },
        },
      ],
      // Two scheduled engines of 2 sequences × 256 tokens (16-token blocks): 512 tokens each.
      metrics: { running: 0, waiting: 0, kvCapacityTokens: 1024, prefixCacheHitRate: null },
      abortRequest: { promptTokenIds: prompt, maxTokens: 8, temperature: 0 },
      tokenizer: {
        cases: [{ label: "chat through the served model's template (the prefill engine's)", req: chat, expected: { tokens: prompt, maxModelLen: 256 } }],
        detokenize: { ids: want.outputTokenIds, expected: detok },
      },
      close: async () => {
        for (const e of engines) await e.close();
        const admin = pool();
        await admin.clear();
        await admin.close();
      },
    };
  });
}
