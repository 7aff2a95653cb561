// The two draft models `arbor bench specdec` compares (issue 17 item 6): the policy moves from version 0
// (models/calc-sft.gguf, where RL starts) to version 1 (models/calc-solver.gguf, the same architecture and
// vocabulary trained further, which the bench serves). A one-block draft is cut from version 0 and distilled
// (Top-K KL, trainer/draft-distiller.ts) on version 0's rollouts: that is the stale draft, left untrained
// after v0. The aligned draft continues from it, distilled again on version 1's rollouts, as a weight sync
// would refresh it. Rollouts are calc prompts other than the measured ones, sampled at temperature 1; the
// draft is trained at the positions the policy generated (where drafts are asked for).
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Rng } from "../core/rng.js";
import { loadScheduledLlamaCpp } from "../engine/core/scheduled-engines.js";
import { calcTasks } from "../envs/calc/tasks.js";
import { renderChat, stopTokenIds } from "../model/chat-template.js";
import { cutDraftModel } from "../model/draft-cut.js";
import { draftFileName } from "../model/draft-model-path.js";
import { configFromGguf, readGguf } from "../model/gguf.js";
import { tokenizerSpecFromGguf } from "../model/gguf-tokenizer.js";
import { Vocab } from "../model/vocab.js";
import { DraftDistiller, type DistillResult, type DistillSequence, type DraftModelOptions } from "../trainer/draft-distiller.js";
import { TinyLlama } from "../trainer/tiny-llama.js";

/** Policy version 0 (where RL starts) and version 1 (the served policy). */
export const POLICY_V0 = fileURLToPath(new URL("../../models/calc-sft.gguf", import.meta.url));
export const POLICY_V1 = fileURLToPath(new URL("../../models/calc-solver.gguf", import.meta.url));

/** The stale and aligned drafts' paths and what each distillation did. */
export interface BenchDrafts {
  stale: string;
  aligned: string;
  /** The served policy (v1) cut to one block, not distilled: the draft an engine starts with. */
  cut: string;
  v0: DistillResult;
  v1: DistillResult;
}

const vocab = new Vocab();

/** Prompt and output ids of `n` calc programs' first turns sampled from the policy at `path`, outputs marked. */
async function rollouts(path: string, n: number, seed: number, maxTokens: number): Promise<DistillSequence[]> {
  const e = await loadScheduledLlamaCpp({ modelPath: path, sequences: Math.min(n, 8), contextSize: 512, maxWaiting: 1024, stopTokenIds: stopTokenIds(vocab) });
  try {
    const prompts = calcTasks(n, seed).map((t) => renderChat(t.prompt, (s) => vocab.encode(s), vocab));
    const outs = await Promise.all(prompts.map((p, i) => e.generate({ promptTokenIds: p, maxTokens, temperature: 1, topP: 1, topLogprobs: 0, rng: new Rng(seed + i) })));
    return outs.map((r, i) => {
      const prompt = prompts[i] as number[];
      return { tokens: [...prompt, ...r.tokens.map((t) => t.id)], generated: [...prompt.map(() => 0), ...r.tokens.map(() => 1)] };
    });
  } finally {
    await e.close();
  }
}

/** Distil the stale (v0) and aligned (v1) drafts into `dir` as draft-v0.gguf and draft-v1.gguf. */
export async function prepareBenchDrafts(dir: string, quick: boolean, maxTokens: number): Promise<BenchDrafts> {
  const options: DraftModelOptions = { layers: 1, steps: quick ? 40 : 100, batch: 8, lr: 1e-3, topK: 16 };
  const n = quick ? 16 : 64;
  const f0 = readGguf(POLICY_V0);
  const f1 = readGguf(POLICY_V1);
  const config = configFromGguf(f0.metadata, POLICY_V0);
  const d = await DraftDistiller.create(config, f0.tensors, tokenizerSpecFromGguf(f0.metadata, POLICY_V0), options, 1);
  const p0 = new TinyLlama(config, f0.tensors);
  const p1 = new TinyLlama(configFromGguf(f1.metadata, POLICY_V1), f1.tensors);
  try {
    const v0 = d.distill(p0, await rollouts(POLICY_V0, n, 31_000, maxTokens));
    const stale = join(dir, draftFileName(0));
    d.save(stale, 0);
    const v1 = d.distill(p1, await rollouts(POLICY_V1, n, 32_000, maxTokens));
    const aligned = join(dir, draftFileName(1));
    d.save(aligned, 1);
    const cut = join(dir, "draft-cut.gguf");
    cutDraftModel(POLICY_V1, cut, options.layers);
    return { stale, aligned, cut, v0, v1 };
  } finally {
    p0.dispose();
    p1.dispose();
    d.dispose();
  }
}
