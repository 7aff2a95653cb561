import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import { startEngineServer } from "../engine/server.js";
import { ensurePolicy } from "../model/policy.js";
import { renderChat } from "../model/chat-template.js";
import { Vocab } from "../model/vocab.js";
import type { TokenBackend } from "./backend.js";
import { describeBackendContract, type ContractHarness } from "./backend.contract.js";
import { startFixtureServer, type FixtureReply, type FixtureRequest } from "../testing/fixture-server.js";
import { createLlamacppBackend } from "./llamacpp.js";
import { createOpenAiBackend } from "./openai.js";
import { createSglangBackend } from "./sglang.js";
import { createArborBackend, createVllmBackend } from "./vllm.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const fixture = (name: string): any => JSON.parse(readFileSync(new URL(`./fixtures/${name}.json`, import.meta.url), "utf8"));

const PROMPT = [128000, 791, 6864, 315, 9822, 374];
const STOP_IDS = [12366, 13, 128009];
const STOP_LPS = [-0.0211181640625, -0.4609375, -0.0009765625];
const LENGTH_IDS = [12366, 13, 578, 6864];
const LENGTH_LPS = [-0.0211181640625, -0.4609375, -1.7734375, -0.8984375];
// Fixture answers are picked by the requested output budget.
const BY_BUDGET: Record<number, string> = { 8: "stop", 4: "length", 3: "abort" };
const sample = (samples: Record<string, unknown>, budget: unknown): FixtureReply =>
  typeof budget === "number" && BY_BUDGET[budget] ? { json: samples[BY_BUDGET[budget]] } : { status: 400, json: { error: { message: `fixture: no sample for budget ${String(budget)}` } } };
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const body = (r: FixtureRequest): any => r.body;

async function fixtureHarness(
  make: (url: string) => TokenBackend,
  route: (r: FixtureRequest) => FixtureReply | undefined,
  rest: Omit<ContractHarness, "backend" | "makeBackend" | "server" | "close">,
  urlSuffix = "/v1",
): Promise<ContractHarness> {
  const server = await startFixtureServer(route);
  return { ...rest, backend: make(server.root + urlSuffix), makeBackend: make, server, close: () => server.close() };
}

function vllmLike(type: "vllm" | "builtin") {
  return async (): Promise<ContractHarness> => {
    const f = fixture(type);
    const policyVersion = type === "builtin" ? 7 : null;
    const make = (url: string) => (type === "builtin" ? createArborBackend : createVllmBackend)({ name: `${type}-0`, url });
    let h: ContractHarness | undefined = undefined;
    h = await fixtureHarness(
      make,
      (r) => {
        if (r.method === "POST" && r.path === "/v1/completions") return sample(f.completions, body(r).max_tokens);
        if (r.method === "POST" && r.path === "/tokenize") return { json: f.tokenize };
        if (r.method === "POST" && r.path === "/detokenize") return { json: f.detokenize };
        if (r.path === "/v1/models") return { json: f.models };
        if (r.path === "/metrics") return { text: f.metrics.join("\n") };
        const m = /^\/v1\/programs\/([^/]+)\/(pause|restore)$/.exec(r.path);
        if (type === "builtin" && r.method === "POST" && m?.[2]) return { json: f.programs[m[2]] };
        return undefined;
      },
      {
        capabilities: { tokenIds: true, logprobs: true, pauseRestore: type === "builtin" },
        cases: [
          {
            label: "stop (eos)",
            req: { promptTokenIds: PROMPT, maxTokens: 8, temperature: 0.7, topP: 0.9, seed: 5, programId: "prog-1", draftGroupId: "group-1" },
            // vLLM clamps -inf to -9999.0.
            expected: { outputTokenIds: STOP_IDS, logprobs: [-0.021118164, -0.4609375, -9999.0], finishReason: "stop", policyVersion, promptTokenIds: PROMPT },
            sent: {
              path: "/v1/completions",
              body: { prompt: PROMPT, max_tokens: 8, temperature: 0.7, top_p: 0.9, seed: 5, logprobs: 0, return_token_ids: true, ...(type === "builtin" ? { program_id: "prog-1", draft_group_id: "group-1" } : {}) },
            },
          },
          {
            label: "length, with stop_token_ids sent and applied",
            req: { promptTokenIds: PROMPT, maxTokens: 4, temperature: 0, stopTokenIds: [578] },
            expected: { outputTokenIds: [12366, 13, 578], logprobs: [-0.021118164, -0.4609375, -1.7734375], finishReason: "stop", policyVersion, promptTokenIds: PROMPT },
            sent: { path: "/v1/completions", body: { prompt: PROMPT, max_tokens: 4, stop_token_ids: [578] } },
          },
          {
            label: "length",
            req: { promptTokenIds: PROMPT, maxTokens: 4, temperature: 0 },
            expected: { outputTokenIds: LENGTH_IDS, logprobs: [-0.021118164, -0.4609375, -1.7734375, -0.8984375], finishReason: "length", policyVersion, promptTokenIds: PROMPT },
          },
        ],
        metrics:
          type === "builtin"
            ? { running: 2, waiting: 0, kvUsage: 0.0625, kvCapacityTokens: 8192, prefixCacheQueries: 960, prefixCacheHits: 0, prefixCacheHitRate: null }
            : { running: 3, waiting: 1, kvUsage: 0.4375, kvCapacityTokens: 16 * 27724, prefixCacheQueries: 51234, prefixCacheHits: 20480, prefixCacheHitRate: null },
        abortRequest: { promptTokenIds: PROMPT, maxTokens: 8, temperature: 0 },
        tokenizer: {
          cases: [
            {
              label: "chat messages (and tool definitions) through the served model's template",
              req: { messages: [{ role: "user", content: "The capital of France is" }], addGenerationPrompt: true, tools: [{ type: "function", function: { name: "lookup" } }] },
              expected: { tokens: PROMPT, maxModelLen: f.tokenize.max_model_len },
              sent: {
                path: "/tokenize",
                body: {
                  messages: [{ role: "user", content: "The capital of France is" }],
                  add_generation_prompt: true,
                  add_special_tokens: false,
                  tools: [{ type: "function", function: { name: "lookup" } }],
                },
              },
            },
            {
              label: "plain text",
              req: { text: "The capital of France is", addSpecialTokens: true },
              expected: { tokens: PROMPT, maxModelLen: f.tokenize.max_model_len },
              sent: { path: "/tokenize", body: { prompt: "The capital of France is", add_special_tokens: true } },
            },
          ],
          detokenize: { ids: PROMPT, expected: f.detokenize.prompt, sent: { path: "/detokenize", body: { tokens: PROMPT } } },
        },
        ...(type === "builtin"
          ? {
              pauseRestore: {
                programId: "prog/1",
                check() {
                  const calls = h!.server!.requests.filter((r) => r.path.startsWith("/v1/programs/")).map((r) => [r.path, r.body]);
                  expect(calls).toEqual([
                    ["/v1/programs/prog%2F1/pause", { to: "L2" }],
                    ["/v1/programs/prog%2F1/restore", {}],
                  ]);
                },
              },
            }
          : {}),
      },
    );
    return h;
  };
}

describeBackendContract("vllm (fixtures)", vllmLike("vllm"));
describeBackendContract("builtin (fixtures)", vllmLike("builtin"));

describeBackendContract("sglang (fixtures)", async () => {
  const f = fixture("sglang");
  const make = (url: string) => createSglangBackend({ name: "sglang-0", url });
  return fixtureHarness(
    make,
    (r) => {
      if (r.method === "POST" && r.path === "/generate") return sample(f.generate, body(r).sampling_params?.max_new_tokens);
      if (r.path === "/get_server_info") return { json: f.server_info };
      if (r.path === "/v1/models") return { json: f.models };
      if (r.path === "/metrics") return { text: f.metrics.join("\n") };
      return undefined;
    },
    {
      capabilities: { tokenIds: true, logprobs: true, pauseRestore: false },
      cases: [
        {
          label: "stop",
          req: { promptTokenIds: PROMPT, maxTokens: 8, temperature: 0.7, topP: 0.9, seed: 5, stopTokenIds: [128009] },
          expected: { outputTokenIds: STOP_IDS, logprobs: STOP_LPS, finishReason: "stop", policyVersion: null, promptTokenIds: PROMPT },
          sent: {
            path: "/generate",
            body: {
              input_ids: PROMPT,
              sampling_params: { max_new_tokens: 8, temperature: 0.7, top_p: 0.9, stop_token_ids: [128009], sampling_seed: 5 },
              return_logprob: true,
              logprob_start_len: -1,
            },
          },
        },
        { label: "length", req: { promptTokenIds: PROMPT, maxTokens: 4, temperature: 0 }, expected: { outputTokenIds: LENGTH_IDS, logprobs: LENGTH_LPS, finishReason: "length", policyVersion: null, promptTokenIds: PROMPT } },
        { label: "abort", req: { promptTokenIds: PROMPT, maxTokens: 3, temperature: 0 }, expected: { outputTokenIds: [12366], logprobs: [-0.0211181640625], finishReason: "abort", policyVersion: null, promptTokenIds: PROMPT } },
      ],
      metrics: { running: 5, waiting: 2, kvUsage: 0.28, kvCapacityTokens: 204800, prefixCacheQueries: 120034, prefixCacheHits: 73220, prefixCacheHitRate: 0.61 },
      abortRequest: { promptTokenIds: PROMPT, maxTokens: 8, temperature: 0 },
    },
    "",
  );
});

describeBackendContract("llamacpp (fixtures)", async () => {
  const f = fixture("llamacpp");
  const make = (url: string) => createLlamacppBackend({ name: "llama-0", url });
  let h: ContractHarness | undefined = undefined;
  h = await fixtureHarness(
    make,
    (r) => {
      if (r.method === "POST" && r.path === "/completion") return sample(f.completion, body(r).n_predict);
      const slot = /^\/slots\/(\d+)$/.exec(r.path);
      if (r.method === "POST" && slot?.[1] && r.query.action && f.slots[r.query.action]) {
        return { json: { ...f.slots[r.query.action], id_slot: Number(slot[1]), ...(body(r).filename ? { filename: body(r).filename } : {}) } };
      }
      if (r.path === "/props") return { json: f.props };
      if (r.method === "POST" && r.path === "/apply-template") return { json: f.apply_template };
      if (r.method === "POST" && r.path === "/tokenize") return { json: f.tokenize };
      if (r.method === "POST" && r.path === "/detokenize") return { json: f.detokenize };
      if (r.path === "/v1/models") return { json: f.models };
      if (r.path === "/metrics") return { text: f.metrics.join("\n") };
      return undefined;
    },
    {
      capabilities: { tokenIds: true, logprobs: true, pauseRestore: true },
      cases: [
        {
          label: "stop (eos) on the program's slot",
          req: { promptTokenIds: PROMPT, maxTokens: 8, temperature: 0.7, topP: 0.9, seed: 5, programId: "prog-a" },
          // Sampled (T > 0): the server reports post-sampling float32 probabilities; the adapter takes their log.
          expected: { outputTokenIds: STOP_IDS, logprobs: [0.97910327, 0.63069206, 0.9990239].map((p) => Math.log(p)), finishReason: "stop", policyVersion: null, promptTokenIds: PROMPT },
          sent: {
            path: "/completion",
            body: { prompt: PROMPT, n_predict: 8, temperature: 0.7, top_p: 0.9, seed: 5, n_probs: 1, post_sampling_probs: true, samplers: ["temperature", "top_p"], cache_prompt: true, return_tokens: true, id_slot: 0 },
          },
        },
        {
          label: "a second program gets the next slot; stop tokens applied by the adapter",
          req: { promptTokenIds: PROMPT, maxTokens: 4, temperature: 0, programId: "prog-b", stopTokenIds: [13] },
          expected: { outputTokenIds: [12366, 13], logprobs: [-0.0211181640625, -0.4609375], finishReason: "stop", policyVersion: null, promptTokenIds: PROMPT },
          sent: { path: "/completion", body: { n_predict: 4, id_slot: 1 } },
        },
        {
          label: "length (limit), server-picked slot",
          req: { promptTokenIds: PROMPT, maxTokens: 4, temperature: 0 },
          expected: { outputTokenIds: LENGTH_IDS, logprobs: LENGTH_LPS, finishReason: "length", policyVersion: null, promptTokenIds: PROMPT },
          sent: { path: "/completion", body: { id_slot: -1 } },
        },
        { label: "abort (stop_type none)", req: { promptTokenIds: PROMPT, maxTokens: 3, temperature: 0 }, expected: { outputTokenIds: [12366], logprobs: [-0.0211181640625], finishReason: "abort", policyVersion: null, promptTokenIds: PROMPT } },
      ],
      metrics: { running: 2, waiting: 1, kvUsage: 0.125, kvCapacityTokens: 4 * 4096, prefixCacheQueries: null, prefixCacheHits: null, prefixCacheHitRate: null },
      abortRequest: { promptTokenIds: PROMPT, maxTokens: 8, temperature: 0 },
      tokenizer: {
        cases: [
          {
            // /apply-template renders the text without the BOS the model adds (llama.cpp strips it), and /tokenize
            // parses its special tokens and adds the BOS once, as llama-server's own chat route does.
            label: "chat messages through /apply-template",
            req: { messages: [{ role: "user", content: "The capital of France is" }], addGenerationPrompt: true },
            expected: { tokens: PROMPT, maxModelLen: f.props.default_generation_settings.n_ctx },
            sent: { path: "/tokenize", body: { content: f.apply_template.prompt, add_special: true, parse_special: true } },
          },
          {
            label: "plain text",
            req: { text: "The capital of France is", addSpecialTokens: true },
            expected: { tokens: PROMPT, maxModelLen: f.props.default_generation_settings.n_ctx },
            sent: { path: "/tokenize", body: { content: "The capital of France is", add_special: true, parse_special: false } },
          },
        ],
        detokenize: { ids: PROMPT, expected: f.detokenize.content, sent: { path: "/detokenize", body: { tokens: PROMPT } } },
      },
      pauseRestore: {
        programId: "prog-a",
        check() {
          const calls = h!.server!.requests.filter((r) => r.path.startsWith("/slots/")).map((r) => [r.path, (r as FixtureRequest).query.action, r.body]);
          const file = (calls[0]?.[2] as { filename?: string } | undefined)?.filename;
          expect(file).toMatch(/^arbor-[0-9a-f]{24}\.bin$/);
          // prog-a held slot 0; on restore it gets the lowest free slot again.
          expect(calls).toEqual([
            ["/slots/0", "save", { filename: file }],
            ["/slots/0", "erase", {}],
            ["/slots/0", "restore", { filename: file }],
          ]);
        },
      },
    },
    "",
  );
  return h;
});

describeBackendContract("openai (fixtures)", async () => {
  const f = fixture("openai");
  const make = (url: string) => createOpenAiBackend({ name: "openai-0", url });
  return fixtureHarness(
    make,
    (r) => {
      if (r.path === "/v1/models") return { json: f.models };
      if (r.method === "POST" && r.path === "/v1/chat/completions") return { json: f.chat };
      return undefined;
    },
    {
      capabilities: { tokenIds: false, logprobs: false, pauseRestore: false },
      cases: [],
      metrics: { running: null, waiting: null, kvUsage: null, kvCapacityTokens: null, prefixCacheQueries: null, prefixCacheHits: null, prefixCacheHitRate: null },
    },
  );
});

// The built-in adapter against the real Arbor engine (tiny seeded policy, one sequence of 256 tokens).
describeBackendContract("builtin (live Arbor engine)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "arbor-contract-"));
  const modelPath = ensurePolicy(dir, { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 }).path;
  const engine = await startEngineServer({ name: "live", modelPath, policyVersion: 3, sequences: 1, contextSize: 256, maxWaiting: 4, seed: 11 });
  const vocab = new Vocab();
  const prompt = [vocab.bosId, ...vocab.encode("What is 2+3?")];
  // The reference: the engine's own answer to the same request (seeded, so repeatable).
  const res = await fetch(`${engine.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt, max_tokens: 6, temperature: 1, seed: 7, logprobs: 0, return_token_ids: true }),
  });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const ref: any = await res.json();
  const ids: number[] = ref.choices[0].token_ids;
  const lps: number[] = ref.choices[0].logprobs.token_logprobs;
  const finish = ref.choices[0].finish_reason;
  const stopAt = ids.indexOf(ids[Math.min(2, ids.length - 1)]!);
  const make = (url: string) => createArborBackend({ name: "live-0", url });
  return {
    backend: make(`${engine.url}/v1`),
    makeBackend: make,
    capabilities: { tokenIds: true, logprobs: true, pauseRestore: true },
    cases: [
      {
        label: "seeded sample equals the engine's own answer",
        req: { promptTokenIds: prompt, maxTokens: 6, temperature: 1, seed: 7 },
        expected: { outputTokenIds: ids, logprobs: lps, finishReason: finish, policyVersion: 3, promptTokenIds: prompt },
      },
      {
        label: "stop token cuts the same sample",
        req: { promptTokenIds: prompt, maxTokens: 6, temperature: 1, seed: 7, stopTokenIds: [ids[stopAt]!] },
        expected: { outputTokenIds: ids.slice(0, stopAt + 1), logprobs: lps.slice(0, stopAt + 1), finishReason: "stop", policyVersion: 3, promptTokenIds: prompt },
      },
    ],
    // The v0 executor: KV geometry is one cell per token, context x sequences.
    metrics: { running: 0, waiting: 0, kvCapacityTokens: 256, prefixCacheHitRate: null },
    abortRequest: { promptTokenIds: prompt, maxTokens: 6, temperature: 0 },
    tokenizer: {
      cases: [
        {
          label: "chat through the tiny policy's template",
          req: { messages: [{ role: "user", content: "What is 2+3?" }], addGenerationPrompt: true },
          expected: { tokens: renderChat([{ role: "user", content: "What is 2+3?" }], (t) => vocab.encode(t), vocab), maxModelLen: 256 },
        },
        { label: "text with BOS", req: { text: "What is 2+3?", addSpecialTokens: true }, expected: { tokens: prompt, maxModelLen: 256 } },
      ],
      detokenize: { ids: ids.slice(0, 3), expected: vocab.decode(ids.slice(0, 3)) },
    },
    async close() {
      await engine.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
