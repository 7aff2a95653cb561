// The llamacpp adapter against a real llama-server (built by scripts/build-llama-server.sh) serving
// Arbor's tiny policy: the shared contract suite, agreement with Arbor's own engine on a greedy
// prompt, the sampled-logprob semantics, the logprobs the server leaves out being filled in
// (llamacpp-rescore.ts), and a program's KV surviving pause/restore.
// Skipped, with the reason printed, when no llama-server binary is available.
// ARBOR_CAPTURE_LLAMACPP=1 also re-captures fixtures/llamacpp-captured.json from the running server.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngineServer } from "../engine/server.js";
import { ensurePolicy } from "../model/policy.js";
import { Vocab } from "../model/vocab.js";
import type { GenerateRequest } from "./backend.js";
import { describeBackendContract, type ContractHarness } from "./backend.contract.js";
import { ACCEPT_ANY_PARSER, createLlamacppBackend } from "./llamacpp.js";
import { findLlamaServer, startLlamaServer, type LlamaServer } from "../testing/llamacpp-server.js";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const found = findLlamaServer(REPO);
if ("missing" in found) console.warn(`[llamacpp-live] skipped: ${found.missing}`);

const INIT = { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 };
const SLOTS = 3;
const SLOT_CTX = 512;
/**
 * Greedy logprobs of llama-server vs Arbor's engine. Both run the same GGUF on ggml's CPU kernels
 * with an F32 KV cache and no flash attention; what differs is the build (SIMD variant, batch
 * splits change float32 summation order, ~1e-6 on logits) and float32 rounding of the reported
 * probability (llama-server takes log in float32: ~1e-7 relative). docs/references.md §L measured 1.3e-5 between
 * llama.cpp and a plain JS forward pass under these settings; 1e-4 leaves room for the two llama.cpp
 * builds while still catching a semantic slip (an off-by-one position, another token's probability,
 * a temperature applied twice): the tiny policy's logprobs at neighbouring positions differ by 3e-2
 * and more.
 */
const LOGPROB_TOL = 1e-4;

const vocab = new Vocab();
const prompt = (text: string) => [vocab.bosId, ...vocab.encode(text)];

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function post(url: string, body: object): Promise<any> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const json = await res.json();
  if (!res.ok) throw new Error(`POST ${url}: HTTP ${res.status} ${JSON.stringify(json)}`);
  return json;
}

describe.skipIf("missing" in found)("llamacpp adapter against a real llama-server", () => {
  let dir = "";
  let saveDir = "";
  let modelPath = "";
  let server: LlamaServer | undefined;
  let started: Promise<LlamaServer> | undefined;

  // One server for the whole file: the contract harness and the tests below share it.
  const ensureServer = (): Promise<LlamaServer> => {
    started ??= (async () => {
      dir = mkdtempSync(join(tmpdir(), "arbor-llama-live-"));
      saveDir = mkdtempSync(join(dir, "slots-"));
      modelPath = ensurePolicy(dir, INIT).path;
      server = await startLlamaServer({ binary: (found as { path: string }).path, modelPath, slots: SLOTS, contextSize: SLOTS * SLOT_CTX, slotSaveDir: saveDir });
      return server;
    })();
    return started;
  };
  const make = (url: string) => createLlamacppBackend({ name: "llama-live", url });

  beforeAll(async () => {
    await ensureServer();
  });
  afterAll(async () => {
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describeBackendContract("llamacpp (live llama-server)", async (): Promise<ContractHarness> => {
    const s = await ensureServer();
    // The references: the server's own answers to hand-written requests on slot 0, asked twice so
    // that they are computed from the same cache state as the adapter's calls (prompt cached, last
    // prompt token re-evaluated), which makes the comparison exact. The prompt is the first whose
    // answers carry a probability for every token (no incomplete UTF-8 tail, see llamacpp-rescore.ts;
    // the rescoring path is tested below).
    const refs = async (text: string) => {
      const greedyBody = { prompt: prompt(text), n_predict: 6, temperature: 0, n_probs: 1, samplers: ["temperature", "top_p"], top_p: 1, return_tokens: true, cache_prompt: true, id_slot: 0, chat_parser: ACCEPT_ANY_PARSER };
      await post(`${s.url}/completion`, greedyBody);
      const greedy = await post(`${s.url}/completion`, greedyBody);
      const sampled = await post(`${s.url}/completion`, { ...greedyBody, temperature: 1, seed: 7, post_sampling_probs: true });
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const whole = (a: any) => a.completion_probabilities.length === a.tokens.length;
      return whole(greedy) && whole(sampled) ? { p: prompt(text), greedy, sampled } : undefined;
    };
    let found: Awaited<ReturnType<typeof refs>>;
    for (const text of ["What is 2+3?", "Hi!", "Count to ten.", "Say yes.", "abc", "Hello there", "1, 2, 3,", "Why?", "ok", "The sky is"]) {
      found = await refs(text);
      if (found) break;
    }
    if (!found) throw new Error("no candidate prompt gave an answer with every token's probability");
    const { p, greedy, sampled } = found;
    const gIds: number[] = greedy.tokens;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const gLps: number[] = greedy.completion_probabilities.map((x: any) => x.logprob);
    const sIds: number[] = sampled.tokens;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const sLps: number[] = sampled.completion_probabilities.map((x: any) => Math.log(x.prob));
    const cut = Math.min(2, gIds.length - 1);
    const base: Omit<GenerateRequest, "signal"> = { promptTokenIds: p, maxTokens: 6, temperature: 0, programId: "live-a" };
    return {
      backend: make(s.url),
      makeBackend: make,
      capabilities: { tokenIds: true, logprobs: true, pauseRestore: true },
      cases: [
        {
          label: "greedy equals the server's own answer",
          req: base,
          expected: { outputTokenIds: gIds, logprobs: gLps, finishReason: greedy.stop_type === "eos" ? "stop" : "length", policyVersion: null, promptTokenIds: p },
        },
        {
          label: "a stop token cuts the same answer",
          req: { ...base, stopTokenIds: [gIds[cut]!] },
          expected: { outputTokenIds: gIds.slice(0, gIds.indexOf(gIds[cut]!) + 1), logprobs: gLps.slice(0, gIds.indexOf(gIds[cut]!) + 1), finishReason: "stop", policyVersion: null, promptTokenIds: p },
        },
        {
          label: "seeded sample equals the server's own answer, with post-sampling logprobs",
          req: { ...base, temperature: 1, seed: 7 },
          expected: { outputTokenIds: sIds, logprobs: sLps, finishReason: sampled.stop_type === "eos" ? "stop" : "length", policyVersion: null, promptTokenIds: p },
        },
      ],
      // llama-server's tokenizer on the GGUF must equal Arbor's own Vocab (same SPM pieces).
      tokenizer: {
        cases: [{ label: "plain text, with BOS", req: { text: "What is 2+3?", addSpecialTokens: true }, expected: { tokens: prompt("What is 2+3?"), maxModelLen: SLOT_CTX } }],
        detokenize: { ids: prompt("What is 2+3?"), expected: "<s>What is 2+3?" },
      },
      // Idle server: nothing running or deferred; --parallel 3 x 512 tokens; no KV-usage gauge in this build.
      metrics: { running: 0, waiting: 0, kvUsage: null, kvCapacityTokens: SLOTS * SLOT_CTX, prefixCacheHitRate: null },
      abortRequest: base,
      pauseRestore: {
        programId: "live-a",
        check() {
          // The slot's KV went to a file in --slot-save-path (and was read back on restore).
          expect(readdirSync(saveDir).filter((f) => /^arbor-[0-9a-f]{24}\.bin$/.test(f))).toHaveLength(1);
        },
      },
      // The server outlives the suite: the tests below use it too.
      close: async () => {},
    };
  });

  it("gives the same greedy tokens and logprobs as Arbor's built-in engine", async () => {
    const s = await ensureServer();
    const p = prompt("The capital of France is");
    const engine = await startEngineServer({ name: "ref", modelPath, policyVersion: 0, sequences: 1, contextSize: 256, maxWaiting: 2 });
    try {
      const ref = await post(`${engine.url}/v1/completions`, { prompt: p, max_tokens: 12, temperature: 0, logprobs: 0, return_token_ids: true });
      const r = await make(s.url).generate({ promptTokenIds: p, maxTokens: 12, temperature: 0, programId: "cross-engine" });
      expect(r.outputTokenIds).toEqual(ref.choices[0].token_ids);
      const refLps: number[] = ref.choices[0].logprobs.token_logprobs;
      const worst = Math.max(...r.logprobs.map((lp, i) => Math.abs(lp - refLps[i]!)));
      expect(worst).toBeLessThanOrEqual(LOGPROB_TOL);
    } finally {
      await engine.close();
    }
  });

  it("reports sampled logprobs as log softmax(log p / T) of the server's own distribution", async () => {
    const s = await ensureServer();
    const p = prompt("Once upon a time");
    const T = 0.8;
    // The full temperature-1 distribution at the first position (pre-sampling probabilities).
    const raw = await post(`${s.url}/completion`, { prompt: p, n_predict: 1, temperature: 0, n_probs: vocab.size, samplers: ["temperature"], return_tokens: true, chat_parser: ACCEPT_ANY_PARSER });
    const rawLp = new Map<number, number>(
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      raw.completion_probabilities[0].top_logprobs.map((x: any) => [x.id as number, x.logprob as number]),
    );
    expect(rawLp.size).toBe(vocab.size);
    const scaled = [...rawLp.values()].map((lp) => lp / T);
    const max = Math.max(...scaled);
    const logZ = max + Math.log(scaled.reduce((a, x) => a + Math.exp(x - max), 0));
    for (const seed of [1, 2, 3]) {
      const r = await make(s.url).generate({ promptTokenIds: p, maxTokens: 1, temperature: T, seed });
      const tok = r.outputTokenIds[0]!;
      expect(Math.abs(r.logprobs[0]! - (rawLp.get(tok)! / T - logZ))).toBeLessThanOrEqual(LOGPROB_TOL);
    }
  });

  it.runIf(process.env.ARBOR_CAPTURE_LLAMACPP === "1")("captures the server's answers as fixtures", async () => {
    const s = await ensureServer();
    const get = async (path: string) => (await fetch(s.url + path)).text();
    // Bodies as the adapter sends them (greedy, sampled); the EOS sample forces token 2 with logit_bias.
    const answers = async (p: number[]) => {
      const body = { prompt: p, n_probs: 1, samplers: ["temperature", "top_p"], top_p: 1, cache_prompt: true, return_tokens: true, stream: false, chat_parser: ACCEPT_ANY_PARSER };
      return {
        length: await post(`${s.url}/completion`, { ...body, n_predict: 4, temperature: 0, id_slot: 0 }),
        sampled: await post(`${s.url}/completion`, { ...body, n_predict: 5, temperature: 1, seed: 7, post_sampling_probs: true, id_slot: 1 }),
        eos: await post(`${s.url}/completion`, { ...body, n_predict: 8, temperature: 0, id_slot: 2, logit_bias: [[vocab.eosId, 100]] }),
        // A greedy answer where the server left probabilities out (for the record; the adapter rescores).
        gap: await post(`${s.url}/completion`, { ...body, n_predict: 6, temperature: 0, id_slot: 0 }),
      };
    };
    // The first prompt whose length and sampled answers carry every token's probability.
    let p: number[] = [];
    let completion: Awaited<ReturnType<typeof answers>> | undefined;
    for (const text of ["What is 2+3?", "Hi!", "Count to ten.", "Say yes.", "abc", "Hello there", "1, 2, 3,", "Why?", "ok", "The sky is"]) {
      p = prompt(text);
      const a = await answers(p);
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const whole = (x: any) => x.completion_probabilities.length === x.tokens.length;
      if (whole(a.length) && whole(a.sampled)) {
        completion = a;
        break;
      }
    }
    if (!completion) throw new Error("no candidate prompt gave whole answers");
    if (completion.gap.completion_probabilities.length === completion.gap.tokens.length) delete (completion as { gap?: unknown }).gap;
    const slots = {
      save: await post(`${s.url}/slots/0?action=save`, { filename: "capture.bin" }),
      erase: await post(`${s.url}/slots/0?action=erase`, {}),
      restore: await post(`${s.url}/slots/0?action=restore`, { filename: "capture.bin" }),
      missing: await (await fetch(`${s.url}/slots/0?action=restore`, { method: "POST", body: JSON.stringify({ filename: "absent.bin" }) })).json(),
    };
    const bin = realpathSync((found as { path: string }).path);
    const commit = execFileSync("git", ["-C", join(bin, "../../.."), "rev-parse", "HEAD"], { encoding: "utf8" }).trim();
    const captured = {
      _source: `Captured live by src/backends/llamacpp-live.test.ts (ARBOR_CAPTURE_LLAMACPP=1) from llama-server built by scripts/build-llama-server.sh from node-llama-cpp's bundled llama.cpp, commit ${commit}; model: Arbor's tiny policy ${JSON.stringify(INIT)}; args: ${s.args.join(" ").replace(/\S*arbor-llama-live-\S*/g, "<tmp>")}.`,
      prompt: p,
      completion,
      tokenize: await post(`${s.url}/tokenize`, { content: "What is 2+3?", add_special: true, parse_special: false }),
      detokenize: await post(`${s.url}/detokenize`, { tokens: p }),
      slots,
      slotsList: JSON.parse(await get("/slots")),
      props: JSON.parse(await get("/props")),
      health: JSON.parse(await get("/health")),
      models: JSON.parse(await get("/v1/models")),
      metrics: (await get("/metrics")).split("\n"),
    };
    // Temp paths and wall-clock values say nothing about the format: make them stable.
    const text = JSON.stringify(captured, null, 2).replace(/"[^"]*arbor-llama-live-[^"]*"/g, '"<tmp>"') + "\n";
    writeFileSync(new URL("./fixtures/llamacpp-captured.json", import.meta.url), text);
    expect(completion.eos.stop_type).toBe("eos");
  });

  it("fills in the logprobs llama-server leaves out (incomplete UTF-8) and they match Arbor's engine", async () => {
    const s = await ensureServer();
    const engine = await startEngineServer({ name: "ref2", modelPath, policyVersion: 0, sequences: 1, contextSize: 256, maxWaiting: 2 });
    try {
      let checked = 0;
      for (const text of ["What is 2+3?", "Hello there", "Tell me a story", "Once upon a time", "x"]) {
        const p = prompt(text);
        const raw = await post(`${s.url}/completion`, { prompt: p, n_predict: 16, temperature: 0, n_probs: 1, samplers: ["temperature"], return_tokens: true, chat_parser: ACCEPT_ANY_PARSER });
        // Only answers where the server dropped some probabilities exercise the rescoring.
        if (raw.completion_probabilities.length === raw.tokens.length) continue;
        const r = await make(s.url).generate({ promptTokenIds: p, maxTokens: 16, temperature: 0 });
        const ref = await post(`${engine.url}/v1/completions`, { prompt: p, max_tokens: 16, temperature: 0, logprobs: 0, return_token_ids: true });
        expect(r.outputTokenIds).toEqual(raw.tokens);
        expect(r.outputTokenIds).toEqual(ref.choices[0].token_ids);
        const refLps: number[] = ref.choices[0].logprobs.token_logprobs;
        expect(Math.max(...r.logprobs.map((lp, i) => Math.abs(lp - refLps[i]!)))).toBeLessThanOrEqual(LOGPROB_TOL);
        checked++;
      }
      // The tiny policy samples byte tokens often: at least one answer above must have needed it.
      expect(checked).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
  });

  it("rescores sampled tokens as the server's own post-sampling distribution gives them", async () => {
    const s = await ensureServer();
    const T = 0.9;
    const b = make(s.url);
    let checked = 0;
    for (const [text, seed] of [["Hello there", 1], ["Tell me a story", 2], ["What is 2+3?", 3], ["x", 4]] as const) {
      const p = prompt(text);
      const sampleBody = { prompt: p, n_predict: 12, temperature: T, seed, n_probs: 1, samplers: ["temperature", "top_p"], top_p: 1, post_sampling_probs: true, return_tokens: true, chat_parser: ACCEPT_ANY_PARSER };
      const raw = await post(`${s.url}/completion`, sampleBody);
      if (raw.completion_probabilities.length === raw.tokens.length) continue;
      const r = await b.generate({ promptTokenIds: p, maxTokens: 12, temperature: T, seed });
      expect(r.outputTokenIds).toEqual(raw.tokens);
      // Each position, asked of the server itself: the whole post-sampling distribution after the
      // same prefix (retrying seeds until the 1 token it samples is one it records probabilities for).
      for (let i = 0; i < r.outputTokenIds.length; i++) {
        let top: { id: number; prob: number }[] | undefined;
        for (let k = 0; k < 20 && !top; k++) {
          const one = await post(`${s.url}/completion`, { ...sampleBody, prompt: [...p, ...r.outputTokenIds.slice(0, i)], n_predict: 1, seed: 1000 + k, n_probs: vocab.size });
          top = one.completion_probabilities[0]?.top_probs;
        }
        const q = top!.find((e) => e.id === r.outputTokenIds[i])!.prob;
        expect(Math.abs(r.logprobs[i]! - Math.log(q))).toBeLessThanOrEqual(LOGPROB_TOL);
      }
      checked++;
    }
    expect(checked).toBeGreaterThan(0);
  });

  it("keeps a program's KV across pause and restore, and not without the restore", async () => {
    const s = await ensureServer();
    const b = make(s.url);
    const hits = async () => (await b.scrapeMetrics()).prefixCacheHits!;
    const p = prompt("Tell me a long story about a dragon and a knight.");
    const first = await b.generate({ promptTokenIds: p, maxTokens: 4, temperature: 0, programId: "kept" });
    const next = [...p, ...first.outputTokenIds];
    // Reference continuation, computed on another program's slot from scratch.
    const fresh = await b.generate({ promptTokenIds: next, maxTokens: 4, temperature: 0, programId: "reference" });

    await b.pause!("kept");
    await b.restore!("kept");
    const before = await hits();
    const resumed = await b.generate({ promptTokenIds: next, maxTokens: 4, temperature: 0, programId: "kept" });
    // The slot came back holding the prompt and all but the last generated token.
    expect((await hits()) - before).toBeGreaterThanOrEqual(next.length - 1);
    expect(resumed.outputTokenIds).toEqual(fresh.outputTokenIds);

    // Control: paused (saved + erased) and not restored, the program's next call starts cold
    // (its new slot shares at most the BOS token with what it held before).
    await b.pause!("kept");
    const before2 = await hits();
    await b.generate({ promptTokenIds: [...next, ...resumed.outputTokenIds], maxTokens: 1, temperature: 0, programId: "kept" });
    expect((await hits()) - before2).toBeLessThanOrEqual(1);
  });
});
