// The built-in engine serving GGUFs that are not Arbor's policy — the made-here models of
// src/model/made/ (Qwen-like byte-level BPE + ChatML with tools, and SentencePiece + Llama-3.1-like
// template): llama.cpp's tokenizer, the GGUF's Jinja chat template, its end-of-generation tokens, the
// tool-call parser its template implies and a configured served name; and the one-line refusals of
// bad models.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stopTokenIds } from "../model/chat-template.js";
import { JinjaChatFormat } from "../model/jinja-chat-format.js";
import { makeModel } from "../model/made/made-models.js";
import { CHATML_TOOLS_TEMPLATE } from "../model/made/templates.js";
import { ensurePolicy } from "../model/policy.js";
import type { ModelTokenizer } from "../model/tokenizer.js";
import { Vocab } from "../model/vocab.js";
import { writeMadeVariant } from "../testing/made-model-variants.js";
import { ScriptedExecutor } from "../testing/scripted-executor.js";
import { IncrementalText } from "./http/stream-chunks.js";
import { LlamaTokenizer } from "./llama-tokenizer.js";
import { isArborVocabulary } from "./served-model.js";
import { createEngineServer, startEngineServer, type EngineServer, type ListeningEngineServer } from "./server.js";

const NAME = "qwen-like-test";
const MESSAGES = [
  { role: "system", content: "You are a calculator." },
  { role: "user", content: "What is 2+3? é" },
];
/** A character outside the made corpus (U+1D11E, four UTF-8 bytes). */
const RARE = "\u{1D11E}";
const TOOLS = [{ type: "function", function: { name: "add", description: "Add two numbers", parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } } } }];

/** The made models' shape: small enough for CPU tests, a context of 1024. */
const INIT = { seed: 5, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 1024 };

interface MadeModel {
  path: string;
  /** The JS tokenizer of the made vocabulary (src/model/made/). */
  js: ModelTokenizer;
  /** Id of `<|im_start|>` / `<|im_end|>`. */
  imStart: number;
  imEnd: number;
}

let dir: string;
let model: MadeModel;
let tok: LlamaTokenizer;
let server: ListeningEngineServer;

/** Id of a special token's text in `tok`. */
function specialId(tok: ModelTokenizer, text: string): number {
  return tok.encode(text, { special: true })[0] as number;
}

/** The JSON events of an SSE body, without the closing `[DONE]`. */
function sseEvents<T>(body: string): T[] {
  return body
    .split("\n\n")
    .filter((l) => l.startsWith("data: ") && l !== "data: [DONE]")
    .map((l) => JSON.parse(l.slice(6)) as T);
}

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
  const made = makeModel("bpe-chatml", dir, INIT);
  model = { path: made.path, js: made.tokenizer, imStart: specialId(made.tokenizer, "<|im_start|>"), imEnd: specialId(made.tokenizer, "<|im_end|>") };
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
    expect(tok.size).toBe(model.js.size);
    expect(tok.addBos).toBe(false);
    // Qwen's ids: `<|endoftext|>` as BOS (never added), `<|im_end|>` as EOS and EOT.
    expect(tok.bosId).toBe(model.js.bosId);
    expect(tok.eosId).toBe(model.imEnd);
    expect([...tok.stopIds]).toEqual([...model.js.stopIds]);
    expect(tok.stopIds).toContain(model.imEnd);
    expect(tok.encode("<|im_start|>user", { special: true })[0]).toBe(model.imStart);
    expect(tok.encode("<|im_start|>user")).not.toContain(model.imStart);
    expect(tok.isSpecial(model.imEnd)).toBe(true);
    expect(tok.isSpecial(tok.encode("a")[0]!)).toBe(false);
    for (const text of ["é", RARE]) {
      const e = tok.encode(text);
      expect(e).toEqual(model.js.encode(text));
      expect(e.flatMap((id) => tok.tokenBytes(id))).toEqual([...Buffer.from(text)]);
      expect(tok.decode(e)).toBe(text);
    }
    expect(tok.decode([model.imStart, ...tok.encode("hi")])).toBe("hi");
    expect(tok.decode([model.imStart, ...tok.encode("hi")], { special: true })).toBe("<|im_start|>hi");
    expect(tok.tokenText(tok.encode(" ")[0]!)).toBe(" ");
  });

  it("streams text that holds back an incomplete UTF-8 character until it completes", () => {
    // A character the made vocabulary never merged: one byte-level token per UTF-8 byte.
    const rare = tok.encode(RARE);
    expect(rare).toHaveLength(4);
    const ids = [...tok.encode("a"), ...rare, ...tok.encode("b")];
    const t = new IncrementalText(tok);
    expect(ids.map((id) => t.push(id))).toEqual(["a", "", "", "", RARE, "b"]);
    const cut = new IncrementalText(tok);
    expect(cut.push(rare[0]!)).toBe("");
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

  it("renders the GGUF's template with llama.cpp's ids, equal to the JS tokenizer's, and /tokenize gives the ids the chat route generated from", async () => {
    const res = await post("/v1/chat/completions", { model: NAME, messages: MESSAGES, max_tokens: 8, return_token_ids: true, seed: 1 });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.model).toBe(NAME);
    const expected = tok.encode(
      "<|im_start|>system\nYou are a calculator.<|im_end|>\n<|im_start|>user\nWhat is 2+3? é<|im_end|>\n<|im_start|>assistant\n",
      { special: true },
    );
    expect(res.body.prompt_token_ids).toEqual(expected);
    expect(expected[0]).toBe(model.imStart);
    expect(model.js.encode(new Template(CHATML_TOOLS_TEMPLATE).render({ messages: MESSAGES, add_generation_prompt: true }), { special: true })).toEqual(expected);
    expect(format().render(MESSAGES as never, { addGenerationPrompt: true })).toEqual(expected);
    const t = await post("/tokenize", { model: NAME, messages: MESSAGES });
    expect(t.status).toBe(200);
    expect(t.body.tokens).toEqual(expected);
    // The template's <think> makes the engine split reasoning out (the "think" parser): the answer's
    // text is its reasoning and content, each a piece of the decoded output.
    const c = res.body.choices[0] as ChatChoice;
    const text = tok.decode(c.finish_reason === "stop" ? c.token_ids.slice(0, -1) : c.token_ids);
    const { content, reasoning_content: reasoning } = c.message as { content: string | null; reasoning_content?: string };
    if (reasoning === undefined || reasoning === null) expect(content).toBe(text);
    else {
      expect(text).toContain(reasoning);
      expect(text).toContain(content ?? "");
    }
  });

  it("stops at <|im_end|> (its EOS: stop_reason null, as vLLM)", async () => {
    const res = await post("/v1/chat/completions", { messages: MESSAGES, max_tokens: 8, return_token_ids: true, logit_bias: { [model.imEnd]: 100 } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const c = res.body.choices[0] as ChatChoice;
    expect(c.token_ids).toEqual([model.imEnd]);
    expect(c.finish_reason).toBe("stop");
    expect(c.stop_reason).toBeNull();
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
    const events = sseEvents<{ choices: { delta?: { content?: string }; token_ids?: number[] }[]; prompt_token_ids?: number[] }>(await res.text());
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
    expect(text).toMatch(/^<\|im_start\|>system\nYou are a calculator\.\n\n# Tools\n/);
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
    const same = writeMadeVariant("bpe-chatml", join(dir, "chatml-v2.gguf"), { ...INIT, seed: 77 });
    const ok = await post("/v1/load_weights", { model_path: same.path, policy_version: 2 });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const t = await post("/tokenize", { messages: MESSAGES });
    expect(t.body.tokens[0]).toBe(model.imStart);
  });
});

/**
 * An engine over `path` whose answers are scripted (the random made models never write a tool call),
 * with llama.cpp's tokenizer of the file, so the engine serves the file's template and detects its
 * parsers exactly as for the real executor.
 */
async function scriptedEngine(path: string, answer: string): Promise<{ server: EngineServer; executor: ScriptedExecutor; close: () => Promise<void> }> {
  const own = await LlamaTokenizer.load(path);
  const executor = new ScriptedExecutor(() => answer, { tokenizer: own, contextSize: 1024, sequences: 1 });
  const s = await createEngineServer({ name: "scripted", modelPath: path, policyVersion: 1, sequences: 1, contextSize: 1024, maxWaiting: 1, executor });
  return {
    server: s,
    executor,
    close: async () => {
      await s.close();
      await own.dispose();
    },
  };
}

interface ToolCallChoice {
  message: { content: string | null; tool_calls?: { type: string; function: { name: string; arguments: string } }[] };
  finish_reason: string;
  token_ids: number[];
}

describe("tool calls in the model's own format (scripted answers)", () => {
  it("bpe-chatml: the Hermes parser (detected from the template) reads <tool_call> blocks, whole and streamed", async () => {
    const e = await scriptedEngine(model.path, '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>');
    try {
      const payload = { messages: MESSAGES, tools: TOOLS, max_tokens: 64, return_token_ids: true };
      const res = await post("/v1/chat/completions", payload, e.server);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const c = res.body.choices[0] as ToolCallChoice;
      expect(c.finish_reason).toBe("tool_calls");
      expect(c.message.tool_calls?.map((t) => [t.function.name, JSON.parse(t.function.arguments)])).toEqual([["add", { a: 2, b: 3 }]]);
      expect(c.token_ids.at(-1)).toBe(model.imEnd);
      // The executor was given the template's render with the tools, in the model's ids.
      expect(e.executor.prompts[0]).toContain('<tools>\n{"type": "function", "function": {"name": "add"');
      const streamed = await e.server.app.inject({ method: "POST", url: "/v1/chat/completions", payload: { ...payload, stream: true } });
      const deltas = sseEvents<{ choices: { delta?: { tool_calls?: { function?: { name?: string; arguments?: string } }[] } }[] }>(streamed.body).flatMap(
        (e) => e.choices[0]?.delta?.tool_calls ?? [],
      );
      expect(deltas.map((d) => d.function?.name ?? "").join("")).toBe("add");
      expect(JSON.parse(deltas.map((d) => d.function?.arguments ?? "").join(""))).toEqual({ a: 2, b: 3 });
    } finally {
      await e.close();
    }
  });
});

describe("SentencePiece + Llama-3 made model", () => {
  const SPM_MESSAGES = [
    { role: "system", content: "You add numbers." },
    { role: "user", content: "What is 2+3? é" },
  ];
  let spm: MadeModel & { bos: number; eot: number; eom: number; template: string };
  let spmTok: LlamaTokenizer;
  let s: EngineServer;

  beforeAll(async () => {
    const made = makeModel("spm-llama3", dir, INIT);
    spm = {
      path: made.path,
      js: made.tokenizer,
      imStart: -1,
      imEnd: -1,
      bos: specialId(made.tokenizer, "<|begin_of_text|>"),
      eot: specialId(made.tokenizer, "<|eot_id|>"),
      eom: specialId(made.tokenizer, "<|eom_id|>"),
      template: made.spec.chatTemplate as string,
    };
    spmTok = await LlamaTokenizer.load(spm.path);
    s = await createEngineServer({ name: "spm", modelPath: spm.path, policyVersion: 1, sequences: 1, contextSize: 1024, maxWaiting: 2, seed: 3 });
  });

  afterAll(async () => {
    await s?.close();
    await spmTok?.dispose();
  });

  it("reads BOS, EOS/EOT <|eot_id|> and EOM <|eom_id|> from the GGUF, as the JS tokenizer does", () => {
    expect(spmTok.size).toBe(spm.js.size);
    expect(spmTok.addBos).toBe(true);
    expect(spmTok.bosId).toBe(spm.bos);
    expect(spmTok.eosId).toBe(spm.eot);
    // llama.cpp's end-of-generation set: EOT, EOM and `<|end_of_text|>` (found by its text).
    expect(spmTok.stopIds).toContain(spm.eot);
    expect(spmTok.stopIds).toContain(spm.eom);
    expect(spmTok.stopIds).toContain(specialId(spm.js, "<|end_of_text|>"));
    expect([...spm.js.stopIds].sort((a, b) => a - b)).toEqual([...spmTok.stopIds].sort((a, b) => a - b));
  });

  it("chat with return_token_ids: prompt ids equal /tokenize of the same messages and the JS tokenizer's encode of the template render", async () => {
    const res = await post("/v1/chat/completions", { messages: SPM_MESSAGES, max_tokens: 6, return_token_ids: true, seed: 1 }, s);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const t = await post("/tokenize", { messages: SPM_MESSAGES }, s);
    expect(t.status).toBe(200);
    expect(res.body.prompt_token_ids).toEqual(t.body.tokens);
    const text = new Template(spm.template).render({ messages: SPM_MESSAGES, bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>", add_generation_prompt: true });
    expect(text).toMatch(/^<\|begin_of_text\|><\|start_header_id\|>system<\|end_header_id\|>\n\n/);
    expect(text.endsWith("<|start_header_id|>assistant<|end_header_id|>\n\n")).toBe(true);
    const want = spm.js.encode(text, { special: true });
    expect(res.body.prompt_token_ids).toEqual(want);
    expect(want).toEqual(spmTok.encode(text, { special: true }));
    // The template writes BOS itself; the engine adds no second one.
    expect(want[0]).toBe(spm.bos);
    expect(want[1]).not.toBe(spm.bos);
    const c = res.body.choices[0] as ChatChoice;
    const content = c.finish_reason === "stop" ? c.token_ids.slice(0, -1) : c.token_ids;
    expect(c.message.content).toBe(spmTok.decode(content));
  });

  it("stops at <|eot_id|> (its EOS: stop_reason null) and at <|eom_id|> (an EOG token that is not EOS: stop_reason its id)", async () => {
    for (const [id, reason] of [
      [spm.eot, null],
      [spm.eom, spm.eom],
    ] as const) {
      const res = await post("/v1/chat/completions", { messages: SPM_MESSAGES, max_tokens: 8, return_token_ids: true, logit_bias: { [id]: 100 } }, s);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const c = res.body.choices[0] as ChatChoice;
      expect(c.token_ids).toEqual([id]);
      expect(c.finish_reason).toBe("stop");
      expect(c.stop_reason).toBe(reason);
      expect(c.message.content).toBe("");
    }
  });

  it("a tool request is read by the llama3_json parser (detected from the template)", async () => {
    const e = await scriptedEngine(spm.path, '{"name": "add", "parameters": {"a": 2, "b": 3}}');
    try {
      const res = await post("/v1/chat/completions", { messages: SPM_MESSAGES, tools: TOOLS, max_tokens: 64, return_token_ids: true }, e.server);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const c = res.body.choices[0] as ToolCallChoice;
      expect(c.finish_reason).toBe("tool_calls");
      expect(c.message.tool_calls?.map((t) => [t.type, t.function.name, JSON.parse(t.function.arguments)])).toEqual([["function", "add", { a: 2, b: 3 }]]);
      expect(c.message.content ?? "").toBe("");
      expect(c.token_ids.at(-1)).toBe(spm.eot);
      // The tools reached the model through the template's system turn (tools_in_user_message=false).
      expect(e.executor.prompts[0]).toContain("Environment: ipython\n");
      expect(e.executor.prompts[0]).toContain('"name": "add"');
      // Earlier calls and their results render as the template writes them (ipython turns).
      const history = [
        ...SPM_MESSAGES,
        { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "add", arguments: '{"a": 2, "b": 3}' } }] },
        { role: "tool", tool_call_id: "c1", content: "5" },
      ];
      const t = await post("/tokenize", { messages: history, tools: TOOLS }, e.server);
      expect(t.status, JSON.stringify(t.body)).toBe(200);
      const text = spmTok.decode(t.body.tokens, { special: true });
      expect(text).toContain('<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "add", "parameters": {"a": 2, "b": 3}}<|eot_id|>');
      expect(text).toContain("<|start_header_id|>ipython<|end_header_id|>\n\n5<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    } finally {
      await e.close();
    }
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
    const bad = writeMadeVariant("bpe-chatml", join(dir, "nonsense.gguf"), INIT, { architecture: "nonsense" });
    const err = await createEngineServer({ name: "x", modelPath: bad.path, policyVersion: 1, sequences: 1, contextSize: 256, maxWaiting: 1 }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/architecture "nonsense" \(general\.architecture\) is not one llama\.cpp can run/);
    expect(err?.message).toContain(bad.path);
    expect(err?.message).not.toContain("\n");
  });

  it("a context length smaller than the engine's contextSize", async () => {
    const small = writeMadeVariant("bpe-chatml", join(dir, "small.gguf"), { ...INIT, contextLength: 256 });
    const err = await createEngineServer({ name: "x", modelPath: small.path, policyVersion: 1, sequences: 1, contextSize: 512, maxWaiting: 1 }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toBe(`model ${small.path}: its context length is 256 tokens (GGUF llama.context_length), smaller than the contextSize 512 the engine asks for`);
  });

  it("a chat template that does not parse (at load) or fails to render (400 on the request)", async () => {
    const unparsable = writeMadeVariant("bpe-chatml", join(dir, "unparsable.gguf"), INIT, { chatTemplate: "{% for m in messages %}{{ m.content }" });
    const err = await createEngineServer({ name: "x", modelPath: unparsable.path, policyVersion: 1, sequences: 1, contextSize: 256, maxWaiting: 1 }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(new RegExp(`^model ${unparsable.path}: chat template ${unparsable.path} \\(tokenizer\\.chat_template\\): does not parse`));
    expect(err?.message).not.toContain("\n");

    const raising = writeMadeVariant("bpe-chatml", join(dir, "raising.gguf"), INIT, { chatTemplate: "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with a user turn') }}{% endif %}x" });
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
    const none = writeMadeVariant("bpe-chatml", join(dir, "none.gguf"), INIT, { chatTemplate: null });
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
