// The shared contract suite for the llamacpp adapter on answers captured live from a real
// llama-server (fixtures/llamacpp-captured.json, see fixtures/README.md): runs everywhere, with no
// llama-server binary, and fails if the adapter stops reading the server's real formats.
import { readFileSync } from "node:fs";
import { expect } from "vitest";
import { describeBackendContract, type ContractHarness } from "./backend.contract.js";
import { startFixtureServer, type FixtureRequest } from "../testing/fixture-server.js";
import { createLlamacppBackend } from "./llamacpp.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const f: any = JSON.parse(readFileSync(new URL("./fixtures/llamacpp-captured.json", import.meta.url), "utf8"));
const prompt: number[] = f.prompt;
// Captured answers, picked by the requested budget as they were captured.
const BY_BUDGET: Record<number, string> = { 4: "length", 5: "sampled", 8: "eos" };
const ids = (k: string): number[] => f.completion[k].tokens;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const probs = (k: string): any[] => f.completion[k].completion_probabilities;
const metric = (name: string): number => Number((f.metrics as string[]).find((l) => l.startsWith(`${name} `))!.split(" ")[1]);

describeBackendContract("llamacpp (captured from a real llama-server)", async (): Promise<ContractHarness> => {
  const make = (url: string) => createLlamacppBackend({ name: "llama-cap", url });
  const server = await startFixtureServer((r: FixtureRequest) => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const body = r.body as any;
    if (r.method === "POST" && r.path === "/completion") {
      const k = BY_BUDGET[body?.n_predict];
      return k ? { json: f.completion[k] } : { status: 400, json: { error: { code: 400, message: `fixture: no sample for n_predict ${body?.n_predict}`, type: "invalid_request_error" } } };
    }
    const slot = /^\/slots\/(\d+)$/.exec(r.path);
    if (r.method === "POST" && slot && (r.query.action === "save" || r.query.action === "restore" || r.query.action === "erase")) {
      return { json: { ...f.slots[r.query.action], id_slot: Number(slot[1]), ...(body?.filename ? { filename: body.filename } : {}) } };
    }
    if (r.method === "POST" && r.path === "/tokenize") return { json: f.tokenize };
    if (r.method === "POST" && r.path === "/detokenize") return { json: f.detokenize };
    if (r.path === "/props") return { json: f.props };
    if (r.path === "/slots") return { json: f.slotsList };
    if (r.path === "/health") return { json: f.health };
    if (r.path === "/v1/models") return { json: f.models };
    if (r.path === "/metrics") return { text: (f.metrics as string[]).join("\n") };
    return undefined;
  });
  const lengthLps = probs("length").map((p) => p.logprob as number);
  const sampledLps = probs("sampled").map((p) => Math.log(p.prob as number));
  const slotCtx: number = f.props.default_generation_settings.n_ctx;
  const fresh = metric("llamacpp:prompt_tokens_total");
  const cached = metric("llamacpp:prompt_tokens_cached_total");
  return {
    backend: make(server.root),
    makeBackend: make,
    server,
    capabilities: { tokenIds: true, logprobs: true, pauseRestore: true },
    cases: [
      {
        label: "greedy, length (limit): raw logprobs",
        req: { promptTokenIds: prompt, maxTokens: 4, temperature: 0, programId: "cap-a" },
        expected: { outputTokenIds: ids("length"), logprobs: lengthLps, finishReason: "length", policyVersion: null, promptTokenIds: prompt },
        sent: { path: "/completion", body: { prompt, n_predict: 4, temperature: 0, n_probs: 1, samplers: ["temperature", "top_p"], top_p: 1, cache_prompt: true, return_tokens: true, id_slot: 0 } },
      },
      {
        label: "seeded sample: the log of the post-sampling probabilities",
        req: { promptTokenIds: prompt, maxTokens: 5, temperature: 1, seed: 7, programId: "cap-b" },
        expected: { outputTokenIds: ids("sampled"), logprobs: sampledLps, finishReason: "length", policyVersion: null, promptTokenIds: prompt },
        sent: { path: "/completion", body: { n_predict: 5, temperature: 1, seed: 7, post_sampling_probs: true, id_slot: 1 } },
      },
      {
        label: "EOS (stop_type eos): the EOS token is kept",
        req: { promptTokenIds: prompt, maxTokens: 8, temperature: 0 },
        expected: { outputTokenIds: ids("eos"), logprobs: probs("eos").map((p) => p.logprob as number), finishReason: "stop", policyVersion: null, promptTokenIds: prompt },
        sent: { path: "/completion", body: { id_slot: -1 } },
      },
    ],
    metrics: {
      running: metric("llamacpp:requests_processing"),
      waiting: metric("llamacpp:requests_deferred"),
      kvUsage: null,
      kvCapacityTokens: f.props.total_slots * slotCtx,
      prefixCacheQueries: fresh + cached,
      prefixCacheHits: cached,
      prefixCacheHitRate: null,
    },
    abortRequest: { promptTokenIds: prompt, maxTokens: 4, temperature: 0 },
    tokenizer: {
      cases: [
        {
          label: "plain text",
          req: { text: "What is 2+3?", addSpecialTokens: true },
          expected: { tokens: f.tokenize.tokens, maxModelLen: slotCtx },
          sent: { path: "/tokenize", body: { content: "What is 2+3?", add_special: true, parse_special: false } },
        },
      ],
      detokenize: { ids: prompt, expected: f.detokenize.content, sent: { path: "/detokenize", body: { tokens: prompt } } },
    },
    pauseRestore: {
      programId: "cap-a",
      check() {
        const calls = server.requests.filter((r) => r.path.startsWith("/slots/")).map((r) => [r.path, r.query.action, r.body]);
        const file = (calls[0]?.[2] as { filename?: string } | undefined)?.filename;
        expect(file).toMatch(/^arbor-[0-9a-f]{24}\.bin$/);
        expect(calls).toEqual([
          ["/slots/0", "save", { filename: file }],
          ["/slots/0", "erase", {}],
          ["/slots/0", "restore", { filename: file }],
        ]);
      },
    },
    close: () => server.close(),
  };
});
