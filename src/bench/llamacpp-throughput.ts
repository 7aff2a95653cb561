// Engine benchmark (c): real decode throughput of Arbor's llama.cpp executor (its own sampler and
// per-token logprobs) beside node-llama-cpp's plain greedy `evaluate` loop on the same policy and
// context settings, at several numbers of concurrent sequences.
import { resolve } from "node:path";
import { performance } from "node:perf_hooks";
import type { Token } from "node-llama-cpp";
import { Rng } from "../core/rng.js";
import { openLlamaContext } from "../engine/llama-context.js";
import { LlamaCppExecutor } from "../engine/llamacpp-executor.js";
import { ensurePolicy } from "../model/policy.js";
import { RunConfigSchema } from "../core/config.js";
import type { BenchOptions, BenchTable } from "./bench.js";

const PROMPT = [1, 300, 301, 302, 303, 304, 305, 306];

/** Tokens/s of Arbor's executor vs node-llama-cpp's own loop, per concurrency level. */
export async function llamacppThroughput(opts: BenchOptions): Promise<BenchTable> {
  // The policy `npm start` uses (the config schema's defaults).
  const init = RunConfigSchema.parse({ engines: [{ name: "e" }] }).model.init;
  const policy = ensurePolicy(resolve(".arbor/models"), init);
  const tokens = opts.quick ? 24 : 256;
  const levels = opts.quick ? [1, 2] : [1, 2, 4];
  const sequences = Math.max(...levels);
  const contextSize = PROMPT.length + tokens + 8;
  const rows: (string | number)[][] = [];

  const executor = await LlamaCppExecutor.load({ modelPath: policy.path, sequences, contextSize, maxWaiting: 0, stopTokenIds: [] });
  // The baseline gets a context of its own with the same settings.
  const { model, context } = await openLlamaContext({ modelPath: policy.path, sequences, contextSize });
  const rawSeqs = Array.from({ length: sequences }, () => context.getSequence());
  try {
    for (const c of levels) {
      opts.log(`llamacpp: ${c} concurrent sequence(s) × ${tokens} tokens`);
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: c }, (_, i) =>
          executor.generate({ promptTokenIds: PROMPT, maxTokens: tokens, temperature: 1, topP: 1, topLogprobs: 0, rng: new Rng(i) }),
        ),
      );
      const arborTps = (c * tokens * 1000) / (performance.now() - t0);

      const t1 = performance.now();
      await Promise.all(
        rawSeqs.slice(0, c).map(async (seq) => {
          await seq.clearHistory();
          let n = 0;
          for await (const _ of seq.evaluate(PROMPT as Token[], { temperature: 0 })) if (++n >= tokens) break;
        }),
      );
      const rawTps = (c * tokens * 1000) / (performance.now() - t1);
      rows.push([c, tokens, arborTps, rawTps, arborTps / rawTps]);
    }
  } finally {
    await executor.close();
    await context.dispose();
    await model.dispose();
  }
  return {
    title: "(c) llama.cpp executor: real decode throughput on the shipped policy (1 thread)",
    columns: ["sequences", "tokens each", "arbor tok/s", "node-llama-cpp tok/s", "ratio"],
    rows,
    notes: [
      `policy ${policy.path}`,
      "arbor = LlamaCppExecutor.generate (Arbor's seeded sampler, per-token logprobs, one controlledEvaluate per step)",
      "node-llama-cpp = seq.evaluate greedy loop, no logprobs; same context settings (F32 KV, no flash attention)",
    ],
  };
}
