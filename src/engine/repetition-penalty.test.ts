// repetition_penalty and logit_bias against an exact reference of vLLM's semantics. The engine's
// llama.cpp gives probabilities, which have lost the raw logits' signs that the penalty depends on;
// the trainer's tfjs forward pass of the same weights gives the raw logits, so the reference is
// computed independently: bias added, then for every token in prompt ∪ output a positive logit
// divided by the penalty and any other multiplied (vLLM apply_penalties), then greedy. Weights are
// scaled far from init so logits reach ±20 with both signs and the penalty changes the argmax.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "../model/config.js";
import { Vocab } from "../model/vocab.js";
import { initWeights } from "../model/weights.js";
import { causalMask } from "../trainer/attention-mask.js";
import { Trainer } from "../trainer/trainer.js";
import { startEngineServer, type ListeningEngineServer } from "./server.js";

const vocab = new Vocab();
const cfg = tinyConfig({ nVocab: vocab.size, nEmbd: 32, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 64, contextLength: 512 });
const rng = new Rng(7);
const tensors = initWeights(cfg, new Rng(3)).map((t) => ({ ...t, data: t.data.map((x) => (t.name.includes("norm") ? 1 + 0.3 * rng.normal() : x * 25)) }));

let dir: string;
let trainer: Trainer;
const engines: Record<string, ListeningEngineServer> = {};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-penalty-"));
  trainer = await Trainer.create(cfg, tensors);
  const { path } = trainer.checkpoint(dir);
  const shape = { modelPath: path, policyVersion: 0, sequences: 2, contextSize: 256, maxWaiting: 4 };
  engines.llamacpp = await startEngineServer({ name: "plain", ...shape });
  engines["llamacpp-scheduled"] = await startEngineServer({ name: "scheduled", executorKind: "llamacpp-scheduled", ...shape });
}, 60_000);

afterAll(async () => {
  for (const e of Object.values(engines)) await e.close();
  trainer?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The trainer's raw next-token logits after `tokens`. */
function rawLogits(tokens: readonly number[]): Float32Array {
  return tf.tidy(() => {
    const n = tokens.length;
    const hidden = trainer.model.hidden(tokens, Int32Array.from(tokens, (_, i) => i), { kind: "dense", mask: causalMask(n) });
    return trainer.model.logits(hidden, [n - 1]).dataSync() as Float32Array;
  }).slice();
}

/** vLLM's greedy generation under logit_bias then repetition_penalty: the ids and their logprobs. */
function reference(prompt: readonly number[], maxTokens: number, penalty: number, bias: ReadonlyMap<number, number>): { ids: number[]; logprobs: number[] } {
  const ids: number[] = [];
  const logprobs: number[] = [];
  for (let step = 0; step < maxTokens; step++) {
    const seen = new Set([...prompt, ...ids]);
    const l = Array.from(rawLogits([...prompt, ...ids]), (x, id) => x + (bias.get(id) ?? 0));
    for (const id of seen) l[id] = (l[id] as number) > 0 ? (l[id] as number) / penalty : (l[id] as number) * penalty;
    let best = 0;
    for (let id = 1; id < l.length; id++) if ((l[id] as number) > (l[best] as number)) best = id;
    const max = l[best] as number;
    const logZ = max + Math.log(l.reduce((s, x) => s + Math.exp(x - max), 0));
    ids.push(best);
    logprobs.push((l[best] as number) - logZ);
  }
  return { ids, logprobs };
}

async function greedy(kind: string, body: Record<string, unknown>): Promise<{ ids: number[]; logprobs: number[] }> {
  const res = await fetch(`${engines[kind]!.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ temperature: 0, logprobs: 0, return_token_ids: true, ignore_eos: true, ...body }),
  });
  const json = (await res.json()) as { choices: { token_ids: number[]; logprobs: { token_logprobs: number[] } }[] };
  expect(res.status, JSON.stringify(json)).toBe(200);
  return { ids: json.choices[0]!.token_ids, logprobs: json.choices[0]!.logprobs.token_logprobs };
}

describe.each(["llamacpp", "llamacpp-scheduled"])("repetition_penalty on the %s executor", (kind) => {
  const draw = new Rng(11);
  const prompt = [vocab.bosId, ...Array.from({ length: 24 }, () => draw.int(3, vocab.size - 1))];
  const N = 12;

  it("matches vLLM's rule on the raw logits, over the prompt and the output so far", async () => {
    for (const penalty of [1.8, 0.6]) {
      const want = reference(prompt, N, penalty, new Map());
      const got = await greedy(kind, { prompt, max_tokens: N, repetition_penalty: penalty });
      expect(got.ids).toEqual(want.ids);
      got.logprobs.forEach((lp, i) => expect(Math.abs(lp - (want.logprobs[i] as number))).toBeLessThan(1e-3));
    }
    // The penalty matters here: plain greedy picks other tokens.
    const plain = reference(prompt, N, 1, new Map());
    expect(plain.ids).not.toEqual(reference(prompt, N, 1.8, new Map()).ids);
  }, 60_000);

  it("applies logit_bias before the penalty (the sign the penalty sees includes the bias)", async () => {
    // Bias prompt tokens up and down by enough to flip their logits' signs.
    const bias = new Map<number, number>();
    [...new Set(prompt.slice(1))].slice(0, 8).forEach((id, i) => bias.set(id, i % 2 === 0 ? 12 : -12));
    const want = reference(prompt, N, 1.8, bias);
    const got = await greedy(kind, { prompt, max_tokens: N, repetition_penalty: 1.8, logit_bias: Object.fromEntries([...bias].map(([k, v]) => [String(k), v])) });
    expect(got.ids).toEqual(want.ids);
    got.logprobs.forEach((lp, i) => expect(Math.abs(lp - (want.logprobs[i] as number))).toBeLessThan(1e-3));
    // Penalising first and biasing after gives another answer: the order is what is tested.
    const wrongOrder = referencePenaltyThenBias(prompt, N, 1.8, bias);
    expect(wrongOrder).not.toEqual(want.ids);
  }, 60_000);
});

/** The wrong order (penalty, then bias), for the control above. */
function referencePenaltyThenBias(prompt: readonly number[], maxTokens: number, penalty: number, bias: ReadonlyMap<number, number>): number[] {
  const ids: number[] = [];
  for (let step = 0; step < maxTokens; step++) {
    const seen = new Set([...prompt, ...ids]);
    const l = Array.from(rawLogits([...prompt, ...ids]));
    for (const id of seen) l[id] = (l[id] as number) > 0 ? (l[id] as number) / penalty : (l[id] as number) * penalty;
    for (const [id, b] of bias) l[id] = (l[id] as number) + b;
    let best = 0;
    for (let id = 1; id < l.length; id++) if ((l[id] as number) > (l[best] as number)) best = id;
    ids.push(best);
  }
  return ids;
}
