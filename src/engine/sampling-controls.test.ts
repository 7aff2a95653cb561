// vLLM's sampling controls on the real engine (llama.cpp, both executors), through the official
// OpenAI client where a client would send them: logit_bias, min_tokens, ignore_eos, stop_token_ids
// and repetition_penalty are honoured with vLLM's semantics (repetition-penalty.test.ts checks the
// penalty exactly); fields the engine cannot honour are a 400 naming the field.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stopTokenIds } from "../model/chat-template.js";
import { ensurePolicy } from "../model/policy.js";
import { Vocab } from "../model/vocab.js";
import { startEngineServer, type ListeningEngineServer } from "./server.js";

const INIT = { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 };
const vocab = new Vocab();
const EOS = vocab.eosId;
const END = stopTokenIds(vocab).find((id) => id !== EOS) as number;
const X = vocab.encode("x")[0] as number;
const PROMPT = "1+1=2. 2+2=4. 3+3=6. 4+4=";

let dir: string;
const engines: Record<string, ListeningEngineServer> = {};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-controls-"));
  const modelPath = ensurePolicy(dir, INIT).path;
  const shape = { modelPath, policyVersion: 0, sequences: 2, contextSize: 256, maxWaiting: 4, seed: 3 };
  engines.llamacpp = await startEngineServer({ name: "plain", ...shape });
  engines["llamacpp-scheduled"] = await startEngineServer({ name: "scheduled", executorKind: "llamacpp-scheduled", ...shape });
});

afterAll(async () => {
  for (const e of Object.values(engines)) await e.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Choice {
  token_ids: number[];
  finish_reason: string;
  stop_reason: number | string | null;
  logprobs: { token_logprobs: number[]; top_logprobs: Record<string, number>[] };
}

async function complete(kind: string, body: Record<string, unknown>): Promise<{ status: number; choice: Choice; error?: { message: string; param: string | null } }> {
  const res = await fetch(`${engines[kind]!.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: PROMPT, return_token_ids: true, logprobs: 0, ...body }),
  });
  const json = (await res.json()) as { choices?: Choice[]; error?: { message: string; param: string | null } };
  return { status: res.status, choice: json.choices?.[0] as Choice, ...(json.error ? { error: json.error } : {}) };
}

describe.each(["llamacpp", "llamacpp-scheduled"])("sampling controls on the %s executor", (kind) => {
  it("logit_bias (token-id string keys) moves the distribution; +100 forces the token, clamped as vLLM", async () => {
    const client = new OpenAI({ baseURL: `${engines[kind]!.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const r = await client.completions.create({
      model: "arbor-tiny",
      prompt: PROMPT,
      max_tokens: 5,
      temperature: 1,
      seed: 7,
      logit_bias: { [String(X)]: 1000 },
      // @ts-expect-error vLLM's extension
      return_token_ids: true,
    });
    const choice = r.choices[0] as unknown as Choice;
    expect(choice.token_ids).toEqual([X, X, X, X, X]);
    // Clamped to +100, not 1000: the bias is bounded as vLLM bounds it, and the result is identical.
    const clamped = await complete(kind, { max_tokens: 5, temperature: 1, seed: 7, logit_bias: { [String(X)]: 100 } });
    expect(clamped.choice.token_ids).toEqual([X, X, X, X, X]);
    // -100 bans it.
    const banned = await complete(kind, { max_tokens: 5, temperature: 0, logit_bias: { [String(X)]: -100 } });
    expect(banned.choice.token_ids).not.toContain(X);
  });

  it("min_tokens holds EOS back until that many tokens, then the generation may stop", async () => {
    // EOS pushed to the top: without min_tokens the first token ends the generation.
    const eager = await complete(kind, { max_tokens: 12, temperature: 0, logit_bias: { [String(EOS)]: 100 } });
    expect(eager.choice.token_ids).toEqual([EOS]);
    expect(eager.choice.finish_reason).toBe("stop");
    const held = await complete(kind, { max_tokens: 12, temperature: 0, min_tokens: 5, logit_bias: { [String(EOS)]: 100 } });
    expect(held.choice.token_ids).toHaveLength(6);
    expect(held.choice.token_ids.slice(0, 5)).not.toContain(EOS);
    expect(held.choice.token_ids.slice(0, 5)).not.toContain(END);
    expect(held.choice.token_ids[5]).toBe(EOS);
    expect(held.choice.finish_reason).toBe("stop");
    expect(held.choice.stop_reason).toBeNull();
    // The reported logprobs are under the distribution drawn from: EOS excluded, so they are finite.
    for (const lp of held.choice.logprobs.token_logprobs) expect(Number.isFinite(lp)).toBe(true);
  });

  it("ignore_eos generates through EOS up to max_tokens", async () => {
    const r = await complete(kind, { max_tokens: 4, temperature: 0, ignore_eos: true, logit_bias: { [String(EOS)]: 100 } });
    expect(r.choice.token_ids).toEqual([EOS, EOS, EOS, EOS]);
    expect(r.choice.finish_reason).toBe("length");
  });

  it("stop_token_ids ends the generation on the token, kept in token_ids, with stop_reason = its id", async () => {
    const r = await complete(kind, { max_tokens: 8, temperature: 1, seed: 2, stop_token_ids: [X], logit_bias: { [String(X)]: 100 } });
    expect(r.choice.token_ids).toEqual([X]);
    expect(r.choice.finish_reason).toBe("stop");
    expect(r.choice.stop_reason).toBe(X);
    // min_tokens also holds back the request's own stop tokens.
    const held = await complete(kind, { max_tokens: 8, temperature: 0, stop_token_ids: [X], min_tokens: 3, logit_bias: { [String(X)]: 100 } });
    expect(held.choice.token_ids.slice(0, 3)).not.toContain(X);
    expect(held.choice.token_ids[3]).toBe(X);
  });

  it("a seeded request with controls reproduces its tokens", async () => {
    const body = { max_tokens: 16, temperature: 1, seed: 99, repetition_penalty: 1.3, min_tokens: 4, logit_bias: { [String(X)]: 2 } };
    const a = await complete(kind, body);
    const b = await complete(kind, body);
    expect(a.choice.token_ids).toEqual(b.choice.token_ids);
  });

  it.each([
    ["response_format", { response_format: { type: "json_object" } }],
    ["best_of", { best_of: 2 }],
    ["suffix", { suffix: "!" }],
    ["top_k", { top_k: 5 }],
    ["guided_json", { guided_json: { type: "object" } }],
    ["repetition_penalty", { repetition_penalty: 0 }],
    ["min_tokens", { min_tokens: 9, max_tokens: 4 }],
    ["logit_bias", { logit_bias: { "999999": 1 } }],
    ["logit_bias.abc", { logit_bias: { abc: 1 } }],
    ["stop_token_ids[0]", { stop_token_ids: [999999] }],
  ])("refuses %s with 400 naming the field", async (param, body) => {
    const r = await complete(kind, { max_tokens: 4, ...body });
    expect(r.status).toBe(400);
    expect(r.error?.param).toBe(param);
  });
});

it("chat completions honour the controls too (official client, streamed and not)", async () => {
  const client = new OpenAI({ baseURL: `${engines["llamacpp-scheduled"]!.url}/v1`, apiKey: "unused", maxRetries: 0 });
  const body = {
    model: "arbor-tiny",
    messages: [{ role: "user" as const, content: "Say x." }],
    max_tokens: 6,
    temperature: 0,
    logit_bias: { [String(X)]: 100 },
    stop_token_ids: [X],
    min_tokens: 2,
  };
  const r = await client.chat.completions.create({ ...body, return_token_ids: true } as OpenAI.ChatCompletionCreateParamsNonStreaming);
  const ids = (r.choices[0] as unknown as { token_ids: number[] }).token_ids;
  expect(ids).toHaveLength(3);
  expect(ids[2]).toBe(X);
  expect(r.choices[0]!.finish_reason).toBe("stop");
  // Streamed: the same text, the stop token held back from the content as in the answer above.
  const stream = await client.chat.completions.create({ ...body, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming);
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
  expect(text).toBe(r.choices[0]!.message.content);
  await expect(client.chat.completions.create({ ...body, response_format: { type: "json_object" } } as OpenAI.ChatCompletionCreateParamsNonStreaming)).rejects.toMatchObject({
    status: 400,
    param: "response_format",
  });
});
