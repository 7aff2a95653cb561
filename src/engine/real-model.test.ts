// The built-in engine serving a GGUF that is not Arbor's policy (the ChatML test model of
// src/testing/chatml-gguf-fixture.ts): llama.cpp's tokenizer, the GGUF's Jinja chat template, its
// end-of-generation tokens and a configured served name; and the one-line refusals of bad models.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JinjaChatFormat } from "../model/jinja-chat-format.js";
import { ensurePolicy } from "../model/policy.js";
import { stopTokenIds } from "../model/chat-template.js";
import { Vocab } from "../model/vocab.js";
import { CHATML_TOOLS_TEMPLATE, writeChatmlModel, type ChatmlModel } from "../testing/chatml-gguf-fixture.js";
import { IncrementalText } from "./http/stream-chunks.js";
import { LlamaTokenizer } from "./llama-tokenizer.js";
import { isArborVocabulary } from "./served-model.js";
import { createEngineServer, startEngineServer, type EngineServer, type ListeningEngineServer } from "./server.js";

const NAME = "qwen-like-test";
const MESSAGES = [
  { role: "system", content: "You are a calculator." },
  { role: "user", content: "What is 2+3? é" },
];
const TOOLS = [{ type: "function", function: { name: "add", description: "Add two numbers", parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } } } }];

let dir: string;
let model: ChatmlModel;
let tok: LlamaTokenizer;
let server: ListeningEngineServer;

async function post(path: string, payload: unknown, target: EngineServer = server) {
  const res = await target.app.inject({ method: "POST", url: path, payload: payload as object });
  return { status: res.statusCode, body: res.json() };
}

interface ChatChoice {
  message: { role: string; content: string | null };
  finish_reason: string;
  stop_reason: number | null;
  token_ids: number[];
  logprobs: { content: { token: string; logprob: number; bytes: number[] }[] } | null;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-real-model-"));
  model = writeChatmlModel(join(dir, "chatml.gguf"));
  tok = await LlamaTokenizer.load(model.path);
  server = await startEngineServer({ name: "rm", modelPath: model.path, policyVersion: 1, sequences: 2, contextSize: 1024, maxWaiting: 4, seed: 3, servedModelName: NAME });
});

afterAll(async () => {
  await server?.close();
  await tok?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("LlamaTokenizer", () => {
  it("reads the model's ids, special tokens, EOG set and add_bos_token from the GGUF", () => {
    expect(tok.size).toBe(model.pieces.length);
    expect(tok.addBos).toBe(false);
    expect(tok.bosId).toBe(1);
    expect(tok.eosId).toBe(2);
    // EOS, the `<|end|>` llama.cpp takes for EOT, and `<|im_end|>` found by its text.
    expect(tok.stopIds).toContain(model.imEnd);
    expect(tok.stopIds).toContain(2);
    expect(tok.encode("<|im_start|>user", { special: true })[0]).toBe(model.imStart);
    expect(tok.encode("<|im_start|>user")).not.toContain(model.imStart);
    expect(tok.isSpecial(model.imEnd)).toBe(true);
    expect(tok.isSpecial(tok.encode("a")[0]!)).toBe(false);
    const e = tok.encode("é");
    expect(e).toHaveLength(2);
    expect(e.flatMap((id) => tok.tokenBytes(id))).toEqual([...Buffer.from("é")]);
    expect(tok.decode(e)).toBe("é");
    expect(tok.decode([model.imStart, ...tok.encode("hi")])).toBe("hi");
    expect(tok.decode([model.imStart, ...tok.encode("hi")], { special: true })).toBe("<|im_start|>hi");
    expect(tok.tokenText(tok.encode(" ")[0]!)).toBe(" ");
  });

  it("streams text that holds back an incomplete UTF-8 character until it completes", () => {
    const ids = [...tok.encode("aé"), ...tok.encode("b")];
    const t = new IncrementalText(tok);
    expect(ids.map((id) => t.push(id))).toEqual(["a", "", "é", "b"]);
    const cut = new IncrementalText(tok);
    expect(cut.push(ids[1]!)).toBe("");
    expect(cut.push(null, true)).toBe("\uFFFD");
  });

  it("gives Arbor's policy the same stops as Arbor's template, so it is served as before", async () => {
    const arbor = await LlamaTokenizer.load(ensurePolicy(dir, { seed: 2, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 1024 }).path);
    try {
      expect(isArborVocabulary(arbor)).toBe(true);
      expect([...arbor.stopIds].sort()).toEqual([...stopTokenIds(new Vocab())].sort());
      expect(isArborVocabulary(tok)).toBe(false);
    } finally {
      await arbor.dispose();
    }
  });
});

describe("chat on a non-Arbor GGUF", () => {
  const format = () => new JinjaChatFormat({ template: CHATML_TOOLS_TEMPLATE, source: "test", tokenizer: tok });

  it("renders the GGUF's template with llama.cpp's ids, and /tokenize gives the ids the chat route generated from", async () => {
    const res = await post("/v1/chat/completions", { model: NAME, messages: MESSAGES, max_tokens: 8, return_token_ids: true, seed: 1 });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.model).toBe(NAME);
    const expected = tok.encode(
      "<|im_start|>system\nYou are a calculator.<|im_end|>\n<|im_start|>user\nWhat is 2+3? é<|im_end|>\n<|im_start|>assistant\n",
      { special: true },
    );
    expect(res.body.prompt_token_ids).toEqual(expected);
    expect(expected[0]).toBe(model.imStart);
    expect(format().render(MESSAGES as never, { addGenerationPrompt: true })).toEqual(expected);
    const t = await post("/tokenize", { model: NAME, messages: MESSAGES });
    expect(t.status).toBe(200);
    expect(t.body.tokens).toEqual(expected);
    const c = res.body.choices[0] as ChatChoice;
    const content = c.finish_reason === "stop" ? c.token_ids.slice(0, -1) : c.token_ids;
    expect(c.message.content).toBe(tok.decode(content));
  });

  it("stops at <|im_end|> (an EOG token that is not EOS), reporting it as stop_reason", async () => {
    const res = await post("/v1/chat/completions", { messages: MESSAGES, max_tokens: 8, return_token_ids: true, logit_bias: { [model.imEnd]: 100 } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const c = res.body.choices[0] as ChatChoice;
    expect(c.token_ids).toEqual([model.imEnd]);
    expect(c.finish_reason).toBe("stop");
    expect(c.stop_reason).toBe(model.imEnd);
    expect(c.message.content).toBe("");
  });

  it("reports logprobs with the model's token text and bytes", async () => {
    const res = await post("/v1/chat/completions", { messages: MESSAGES, max_tokens: 6, return_token_ids: true, logprobs: true, top_logprobs: 2, seed: 4 });
    expect(res.status).toBe(200);
    const c = res.body.choices[0] as ChatChoice;
    const lp = c.logprobs!.content;
    expect(lp).toHaveLength(c.token_ids.length);
    lp.forEach((e, i) => {
      expect(e.bytes).toEqual(tok.tokenBytes(c.token_ids[i]!));
      expect(e.token).toBe(tok.tokenText(c.token_ids[i]!));
      expect(e.logprob).toBeLessThanOrEqual(0);
    });
  });

  it("streams deltas and ids that add up to the non-streamed answer", async () => {
    const payload = { messages: MESSAGES, max_tokens: 24, return_token_ids: true, seed: 9, temperature: 1.5 };
    const whole = await post("/v1/chat/completions", payload);
    const res = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ...payload, stream: true }) });
    const events = (await res.text())
      .split("\n\n")
      .filter((l) => l.startsWith("data: ") && l !== "data: [DONE]")
      .map((l) => JSON.parse(l.slice(6)) as { choices: { delta?: { content?: string }; token_ids?: number[] }[]; prompt_token_ids?: number[] });
    const text = events.map((e) => e.choices[0]?.delta?.content ?? "").join("");
    const ids = events.flatMap((e) => e.choices[0]?.token_ids ?? []);
    const c = whole.body.choices[0] as ChatChoice;
    expect(ids).toEqual(c.token_ids);
    expect(text).toBe(c.message.content);
    expect(events[0]?.prompt_token_ids).toEqual(whole.body.prompt_token_ids);
  });

  it("renders tools and earlier tool calls through the template, and the forced call's opening with special tokens", async () => {
    const history = [
      ...MESSAGES,
      { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "add", arguments: '{"a": 2, "b": 3}' } }] },
      { role: "tool", tool_call_id: "c1", content: "5" },
    ];
    const t = await post("/tokenize", { messages: history, tools: TOOLS });
    expect(t.status, JSON.stringify(t.body)).toBe(200);
    const text = tok.decode(t.body.tokens, { special: true });
    expect(text).toContain('<tools>\n{"type": "function", "function": {"name": "add"');
    expect(text).toContain('<|im_start|>assistant\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call><|im_end|>');
    expect(text).toContain("<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
    const forced = await post("/tokenize", { messages: history, tools: TOOLS, tool_choice: { type: "function", function: { name: "add" } } });
    expect(forced.body.tokens.slice(0, t.body.tokens.length)).toEqual(t.body.tokens);
    expect(forced.body.tokens.length).toBeGreaterThan(t.body.tokens.length);
    const chat = await post("/v1/chat/completions", { messages: history, tools: TOOLS, max_tokens: 4, return_token_ids: true });
    expect(chat.status, JSON.stringify(chat.body)).toBe(200);
    expect(chat.body.prompt_token_ids).toEqual(t.body.tokens);
  });

  it("tokenizes and detokenizes text prompts with the model's tokenizer (no BOS: add_bos_token is false)", async () => {
    const t = await post("/tokenize", { prompt: "<|im_start|>hi" });
    expect(t.body.tokens).toEqual(tok.encode("<|im_start|>hi", { special: true }));
    const d = await post("/detokenize", { tokens: t.body.tokens });
    expect(d.body.prompt).toBe("<|im_start|>hi");
    const c = await post("/v1/completions", { prompt: "ab", max_tokens: 2, return_token_ids: true });
    expect(c.status).toBe(200);
    expect(c.body.choices[0].prompt_token_ids).toEqual(tok.encode("ab"));
  });

  it("serves the official openai client, plain and streamed", async () => {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0 });
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([NAME]);
    const answer = await client.chat.completions.create({ model: NAME, messages: MESSAGES as never, max_tokens: 6, seed: 2 });
    expect(typeof answer.choices[0]?.message.content).toBe("string");
    const stream = await client.chat.completions.create({ model: NAME, messages: MESSAGES as never, max_tokens: 6, seed: 2, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe(answer.choices[0]?.message.content);
  });

  it("refuses a message that cannot fit before rendering it, counting by the model's longest token", async () => {
    const res = await post("/v1/chat/completions", { messages: [{ role: "user", content: "a".repeat(40_000) }], max_tokens: 2 });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("context_length_exceeded");
    expect(res.body.error.message).toMatch(/^messages\[0\]\.content: has at least \d+ tokens, over the context of 1024 tokens/);
    // A message longer in characters than the context but short in tokens is not refused early.
    const ok = await post("/tokenize", { messages: [{ role: "user", content: "<|im_end|>".repeat(120) }] });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.count).toBeLessThan(1024);
  });

  it("tokenizes while asleep (the engine's tokenizer outlives the executor) and wakes up on the same model", async () => {
    const before = await post("/tokenize", { messages: MESSAGES });
    expect((await post("/sleep", {})).status).toBe(200);
    const asleep = await post("/tokenize", { messages: MESSAGES });
    expect(asleep.status).toBe(200);
    expect(asleep.body.tokens).toEqual(before.body.tokens);
    expect((await post("/v1/chat/completions", { messages: MESSAGES, max_tokens: 2 })).status).toBe(503);
    expect((await post("/wake_up", {})).status).toBe(200);
    expect((await post("/v1/chat/completions", { messages: MESSAGES, max_tokens: 2 })).status).toBe(200);
  });

  it("refuses a weight switch to a GGUF with another vocabulary, and keeps serving", async () => {
    const arborPath = ensurePolicy(dir, { seed: 2, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 1024 }).path;
    const res = await post("/v1/load_weights", { model_path: arborPath, policy_version: 2 });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/vocabulary is not the served model's/);
    expect(res.body.error.message).toContain(arborPath);
    const same = writeChatmlModel(join(dir, "chatml-v2.gguf"), { seed: 77 });
    const ok = await post("/v1/load_weights", { model_path: same.path, policy_version: 2 });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const t = await post("/tokenize", { messages: MESSAGES });
    expect(t.body.tokens[0]).toBe(model.imStart);
  });
});

describe("gpu: auto", () => {
  it("serves the same tokens and logprobs as the CPU build (falling back to it where no GPU build is installed)", async () => {
    const gpu = await createEngineServer({ name: "g", modelPath: model.path, policyVersion: 1, sequences: 1, contextSize: 1024, maxWaiting: 1, gpu: "auto" });
    const cpu = await createEngineServer({ name: "c", modelPath: model.path, policyVersion: 1, sequences: 1, contextSize: 1024, maxWaiting: 1 });
    try {
      const payload = { messages: MESSAGES, max_tokens: 6, return_token_ids: true, logprobs: true, seed: 8 };
      const a = (await post("/v1/chat/completions", payload, gpu)).body.choices[0] as ChatChoice;
      const b = (await post("/v1/chat/completions", payload, cpu)).body.choices[0] as ChatChoice;
      expect(a.token_ids).toEqual(b.token_ids);
      a.logprobs!.content.forEach((e, i) => expect(e.logprob).toBeCloseTo(b.logprobs!.content[i]!.logprob, 4));
    } finally {
      await gpu.close();
      await cpu.close();
    }
  });
});

describe("bad models: one line naming the file and the reason", () => {
  it("an architecture llama.cpp cannot run", async () => {
    const bad = writeChatmlModel(join(dir, "nonsense.gguf"), { architecture: "nonsense" });
    const err = await createEngineServer({ name: "x", modelPath: bad.path, policyVersion: 1, sequences: 1, contextSize: 256, maxWaiting: 1 }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/architecture "nonsense" \(general\.architecture\) is not one llama\.cpp can run/);
    expect(err?.message).toContain(bad.path);
    expect(err?.message).not.toContain("\n");
  });

  it("a context length smaller than the engine's contextSize", async () => {
    const small = writeChatmlModel(join(dir, "small.gguf"), { contextLength: 256 });
    const err = await createEngineServer({ name: "x", modelPath: small.path, policyVersion: 1, sequences: 1, contextSize: 512, maxWaiting: 1 }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toBe(`model ${small.path}: its context length is 256 tokens (GGUF llama.context_length), smaller than the contextSize 512 the engine asks for`);
  });

  it("a chat template that does not parse (at load) or fails to render (400 on the request)", async () => {
    const unparsable = writeChatmlModel(join(dir, "unparsable.gguf"), { chatTemplate: "{% for m in messages %}{{ m.content }" });
    const err = await createEngineServer({ name: "x", modelPath: unparsable.path, policyVersion: 1, sequences: 1, contextSize: 256, maxWaiting: 1 }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(new RegExp(`^model ${unparsable.path}: chat template ${unparsable.path} \\(tokenizer\\.chat_template\\): does not parse`));
    expect(err?.message).not.toContain("\n");

    const raising = writeChatmlModel(join(dir, "raising.gguf"), { chatTemplate: "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with a user turn') }}{% endif %}x" });
    const s = await createEngineServer({ name: "x", modelPath: raising.path, policyVersion: 1, sequences: 1, contextSize: 256, maxWaiting: 1 });
    try {
      const res = await post("/v1/chat/completions", { messages: MESSAGES, max_tokens: 2 }, s);
      expect(res.status).toBe(400);
      expect(res.body.error.message).toBe(`messages: chat template ${raising.path} (tokenizer.chat_template): raise_exception: Conversations must start with a user turn`);
      const fine = await post("/v1/completions", { prompt: "ab", max_tokens: 2 }, s);
      expect(fine.status).toBe(200);
    } finally {
      await s.close();
    }
  });

  it("a GGUF without a chat template serves completions and refuses chat with the reason", async () => {
    const none = writeChatmlModel(join(dir, "none.gguf"), { chatTemplate: null });
    const s = await createEngineServer({ name: "x", modelPath: none.path, policyVersion: 1, sequences: 1, contextSize: 256, maxWaiting: 1 });
    try {
      const res = await post("/v1/chat/completions", { messages: MESSAGES, max_tokens: 2 }, s);
      expect(res.status).toBe(400);
      expect(res.body.error.message).toContain("has no tokenizer.chat_template");
      expect((await post("/v1/completions", { prompt: "ab", max_tokens: 2 }, s)).status).toBe(200);
    } finally {
      await s.close();
    }
  });
});
