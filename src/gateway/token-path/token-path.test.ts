// The token path on the real built-in engine (tiny policy on llama.cpp): the gateway builds each
// prompt from the program's token history and records exactly what the engine generated.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createArborBackend } from "../../backends/vllm.js";
import type { Call } from "../../core/types.js";
import { startEngineServer, type ListeningEngineServer } from "../../engine/server.js";
import { ensurePolicy } from "../../model/policy.js";
import { createGateway, type Gateway } from "../server.js";
import { startFaultProxy } from "../../testing/fault-proxy.js";

let dir: string;
let engine: ListeningEngineServer;
let gateway: Gateway;
let url: string;
const calls: Call[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-token-path-"));
  const policy = ensurePolicy(dir, { seed: 9, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 1024 });
  engine = await startEngineServer({ name: "e0", modelPath: policy.path, policyVersion: 4, sequences: 2, contextSize: 1024, maxWaiting: 8 });
  gateway = createGateway({ backends: [createArborBackend({ name: "e0", url: `${engine.url}/v1` })], sink: { recordCall: async (c) => void calls.push(c) } });
  url = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
  await engine?.close();
  rmSync(dir, { recursive: true, force: true });
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function enginePost(path: string, body: object): Promise<any> {
  const res = await fetch(`${engine.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(res.status, path).toBe(200);
  return res.json();
}

type Msg = { role: "system" | "user" | "assistant"; content: string };
const engineTokens = async (messages: Msg[], addGenerationPrompt = true): Promise<number[]> =>
  (await enginePost("/tokenize", { messages, add_generation_prompt: addGenerationPrompt })).tokens;

const callsOf = (programId: string): Call[] => calls.filter((c) => c.programId === programId);

describe("token path on the real engine", () => {
  it("records exactly the ids and logprobs the engine generates for the engine-tokenized prompt", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/tp-a/v1`, apiKey: "unused", maxRetries: 0 });
    const messages: Msg[] = [{ role: "user", content: "What is 2+3?" }];
    const { data: res, response } = await client.chat.completions
      .create({ model: "arbor-tiny", messages, max_tokens: 12, temperature: 1, seed: 3, logprobs: true })
      .withResponse();
    const call = callsOf("tp-a")[0]!;
    expect(call.promptTokenIds).toEqual(await engineTokens(messages));
    // The engine's own answer to the same token prompt and seed: the recorded call is exactly it.
    const ref = await enginePost("/v1/completions", { prompt: call.promptTokenIds, max_tokens: 12, temperature: 1, seed: 3, logprobs: 0, return_token_ids: true });
    expect(call.outputTokenIds).toEqual(ref.choices[0].token_ids);
    expect(call.logprobs).toEqual(ref.choices[0].logprobs.token_logprobs);
    expect(call.finishReason).toBe(ref.choices[0].finish_reason);
    expect(call.policyVersion).toBe(4);
    expect(call.contextReset).toBeUndefined();
    // The client's answer keeps the engine's shape.
    expect(response.headers.get("x-arbor-call-id")).toBe(call.id);
    expect(res.object).toBe("chat.completion");
    expect(res.choices[0]!.message.content).toBe(ref.choices[0].text);
    expect(res.choices[0]!.message.content).toBe(call.outputText);
    expect(res.choices[0]!.logprobs!.content!.map((c) => c.logprob)).toEqual(call.logprobs);
    expect(res.usage).toEqual({ prompt_tokens: call.promptTokenIds.length, completion_tokens: call.outputTokenIds.length, total_tokens: call.promptTokenIds.length + call.outputTokenIds.length });
    const raw = res as unknown as { prompt_token_ids: number[]; policy_version: number; choices: { token_ids: number[] }[] };
    expect(raw.prompt_token_ids).toEqual(call.promptTokenIds);
    expect(raw.choices[0]!.token_ids).toEqual(call.outputTokenIds);
    expect(raw.policy_version).toBe(4);
  });

  it("continues the next call from the previous prompt and output ids, not from re-tokenized text", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/tp-b/v1`, apiKey: "unused", maxRetries: 0 });
    const first: Msg[] = [
      { role: "system", content: "You are terse." },
      { role: "user", content: "What is 2+3?" },
    ];
    const r1 = await client.chat.completions.create({ model: "arbor-tiny", messages: first, max_tokens: 10, temperature: 1, seed: 11 });
    const second: Msg[] = [...first, { role: "assistant", content: r1.choices[0]!.message.content ?? "" }, { role: "user", content: "And 4+4?" }];
    const r2 = await client.chat.completions.create({ model: "arbor-tiny", messages: second, max_tokens: 10, temperature: 1, seed: 12 });
    const [c1, c2] = callsOf("tp-b");
    const context = [...c1!.promptTokenIds, ...c1!.outputTokenIds];
    expect(c2!.promptTokenIds.slice(0, context.length)).toEqual(context);
    expect(c2!.contextReset).toBeUndefined();
    // What follows is what the template adds for the new turn: the tail of the full render.
    const full = await engineTokens(second);
    const upToAnswer = await engineTokens(second.slice(0, 3), false);
    const added = full.slice(upToAnswer.length);
    expect(c2!.promptTokenIds.slice(-added.length)).toEqual(added);
    // A cut-off answer gets the template's end-of-turn token before the new turn; a stopped one ends in its own stop token.
    const extra = c2!.promptTokenIds.length - context.length - added.length;
    expect(extra).toBe(c1!.finishReason === "stop" ? 0 : 1);
    expect(r2.usage?.prompt_tokens).toBe(c2!.promptTokenIds.length);
    // The recorded output of the second call is the engine's answer to exactly that prompt.
    const ref = await enginePost("/v1/completions", { prompt: c2!.promptTokenIds, max_tokens: 10, temperature: 1, seed: 12, logprobs: 0, return_token_ids: true });
    expect(c2!.outputTokenIds).toEqual(ref.choices[0].token_ids);

    // Edited history (context management): the whole conversation is tokenized afresh, and noted.
    const edited: Msg[] = [{ role: "user", content: "Summarize: 2+3=5." }, { role: "user", content: "And 4+4?" }];
    await client.chat.completions.create({ model: "arbor-tiny", messages: edited, max_tokens: 4, temperature: 0 });
    const c3 = callsOf("tp-b")[2]!;
    expect(c3.contextReset).toBe(true);
    expect(c3.promptTokenIds).toEqual(await engineTokens(edited));
  });

  it("continues text completions from the previous ids and maps token-id prompts as given", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/tp-c/v1`, apiKey: "unused", maxRetries: 0 });
    const r1 = await client.completions.create({ model: "arbor-tiny", prompt: "1+1=", max_tokens: 5, temperature: 1, seed: 2, logprobs: 0 });
    const c1 = callsOf("tp-c")[0]!;
    expect(r1.object).toBe("text_completion");
    expect(r1.choices[0]!.logprobs!.token_logprobs).toEqual(c1.logprobs);
    expect(r1.choices[0]!.text).toBe(c1.outputText);
    expect(c1.promptTokenIds).toEqual((await enginePost("/tokenize", { prompt: "1+1=" })).tokens);
    await client.completions.create({ model: "arbor-tiny", prompt: `1+1=${r1.choices[0]!.text} 2+2=`, max_tokens: 3, temperature: 0 });
    const c2 = callsOf("tp-c")[1]!;
    const context = [...c1.promptTokenIds, ...c1.outputTokenIds];
    expect(c2.promptTokenIds.slice(0, context.length)).toEqual(context);
    expect(c2.promptTokenIds.slice(context.length)).toEqual((await enginePost("/tokenize", { prompt: " 2+2=", add_special_tokens: false })).tokens);
    await client.completions.create({ model: "arbor-tiny", prompt: [1, 5, 6] as unknown as string, max_tokens: 2, temperature: 0 });
    expect(callsOf("tp-c")[2]!.promptTokenIds).toEqual([1, 5, 6]);
    expect(callsOf("tp-c")[2]!.contextReset).toBe(true);
  });

  it("refuses sampling controls it cannot honour with a 400 naming the field, recording nothing", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/tp-d/v1`, apiKey: "unused", maxRetries: 0 });
    const ask = (extra: object) =>
      client.chat.completions.create({ model: "arbor-tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 3, ...extra } as never).catch((e: unknown) => e);
    for (const [extra, field] of [
      [{ presence_penalty: 0.5 }, "presence_penalty"],
      [{ logprobs: true, top_logprobs: 2 }, "top_logprobs"],
      [{ stop: ["What is 2"] }, "stop[0]"],
      [{ temperature: -1 }, "temperature"],
    ] as const) {
      const e = (await ask(extra)) as { status?: number; message?: string };
      expect(e.status, field).toBe(400);
      expect(e.message, field).toContain(`${field}:`);
    }
    expect(callsOf("tp-d")).toEqual([]);
    // What the engine itself refuses (a 4xx) reaches the client with the engine's status and message.
    const tooLong = (await client.chat.completions
      .create({ model: "arbor-tiny", messages: [{ role: "user", content: "x".repeat(2000) }], max_tokens: 3 })
      .catch((e: unknown) => e)) as { status?: number; message?: string };
    expect(tooLong.status).toBe(400);
    expect(tooLong.message).toMatch(/messages\[0\]\.content: has at least 2000 tokens, over the context of 1024 tokens/);
    expect(callsOf("tp-d")).toEqual([]);
    // A one-token stop string maps to its token id: the same seeded sample ends right after it.
    let found: { seed: number; free: Call; cut: number; text: string } | undefined;
    for (let seed = 5; seed < 25 && !found; seed++) {
      await ask({ temperature: 1, seed, max_tokens: 12 });
      const free = callsOf("tp-d").at(-1)!;
      for (const [i, id] of free.outputTokenIds.entries()) {
        if (i === 0 || free.outputTokenIds.indexOf(id) !== i) continue;
        const text: string = (await enginePost("/detokenize", { tokens: [id] })).prompt;
        const back: number[] = (await enginePost("/tokenize", { prompt: text, add_special_tokens: false })).tokens;
        if (text !== "" && back.length === 1 && back[0] === id) {
          found = { seed, free, cut: i, text };
          break;
        }
      }
    }
    expect(found).toBeDefined();
    const { seed, free, cut, text } = found!;
    const answer = (await ask({ stop: text, temperature: 1, seed, max_tokens: 12 })) as { choices: { stop_reason?: unknown }[] };
    const stopped = callsOf("tp-d").at(-1)!;
    expect(stopped.outputTokenIds).toEqual(free.outputTokenIds.slice(0, cut + 1));
    expect(stopped.finishReason).toBe("stop");
    // The answer says which stop ended it (vLLM's stop_reason; Anthropic's stop_sequence), plain and streamed.
    expect(answer.choices[0]!.stop_reason).toBe(text);
    const stream = await client.chat.completions.create({ model: "arbor-tiny", messages: [{ role: "user", content: "hi" }], stop: text, temperature: 1, seed, max_tokens: 12, stream: true });
    const reasons: unknown[] = [];
    for await (const chunk of stream) for (const c of chunk.choices) if (c.finish_reason) reasons.push((c as { stop_reason?: unknown }).stop_reason);
    expect(reasons).toEqual([text]);
    const unstopped = (await ask({ temperature: 1, seed, max_tokens: 12 })) as { choices: { stop_reason?: unknown }[] };
    expect(unstopped.choices[0]!.stop_reason).toBeNull();
  });

  it("refuses, as the engine does, stream_options without stream or not an object and a user turn without content", async () => {
    const post = async (root: string, body: object) => {
      const res = await fetch(`${root}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      return { status: res.status, error: ((await res.json()) as { error: { message: string; type: string; param: string | null } }).error };
    };
    const base = { model: "arbor-tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 2 };
    for (const [body, param, message] of [
      [{ ...base, stream_options: { include_usage: true } }, "stream_options", /^stream_options: can only be set when stream is true/],
      [{ ...base, stream: true, stream_options: "yes" }, "stream_options", /^stream_options: expected an object, got "yes"/],
      [{ ...base, messages: [{ role: "user", content: null }] }, "messages[0].content", /^messages\[0\]\.content: must be a string or a list of text parts/],
      [{ ...base, messages: [{ role: "system", content: "s" }, { role: "user" }] }, "messages[1].content", /^messages\[1\]\.content: /],
    ] as const) {
      const gateway = await post(`${url}/p/tp-lax/v1`, body);
      const own = await post(`${engine.url}/v1`, body);
      expect(gateway.status, param).toBe(400);
      expect(gateway.error, param).toMatchObject({ type: "invalid_request_error", param, message: expect.stringMatching(message) });
      expect(own, param).toMatchObject({ status: 400, error: { param } });
    }
    expect(callsOf("tp-lax")).toEqual([]);
    // An assistant turn that only made tool calls has null content, as OpenAI allows.
    const toolTurn = { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }] };
    const tools = [{ type: "function", function: { name: "f", parameters: { type: "object" } } }];
    const served = await fetch(`${url}/p/tp-lax/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...base, tools, messages: [{ role: "user", content: "hi" }, toolTurn, { role: "tool", tool_call_id: "c1", content: "ok" }] }),
    });
    expect(served.status).toBe(200);
  });

  it("serves Anthropic Messages and OpenAI Responses through the token path too", async () => {
    const anthropic = new Anthropic({ baseURL: `${url}/p/tp-e`, apiKey: "unused", maxRetries: 0 });
    const msg = await anthropic.messages.create({ model: "arbor-tiny", max_tokens: 6, messages: [{ role: "user", content: "What is 2+3?" }] });
    const c1 = callsOf("tp-e")[0]!;
    expect(msg.content.map((b) => (b.type === "text" ? b.text : "")).join("")).toBe(c1.outputText);
    expect(msg.usage.output_tokens).toBe(c1.outputTokenIds.length);
    expect(c1.promptTokenIds).toEqual(await engineTokens([{ role: "user", content: "What is 2+3?" }]));
    const openai = new OpenAI({ baseURL: `${url}/p/tp-f/v1`, apiKey: "unused", maxRetries: 0 });
    const r = await openai.responses.create({ model: "arbor-tiny", input: "What is 2+3?", max_output_tokens: 6 });
    const c2 = callsOf("tp-f")[0]!;
    expect(r.output_text).toBe(c2.outputText);
    expect(r.usage?.output_tokens).toBe(c2.outputTokenIds.length);
  });

  it("names the client's own field when the engine refuses a prompt for the context, on every surface", async () => {
    const long = "x".repeat(2000);
    const openai = new OpenAI({ baseURL: `${url}/p/tp-names/v1`, apiKey: "unused", maxRetries: 0 });
    const anthropic = new Anthropic({ baseURL: `${url}/p/tp-names`, apiKey: "unused", maxRetries: 0 });
    const failure = (p: Promise<unknown>) => p.then(() => ({}) as { status?: number; message?: string; param?: string }, (e: { status?: number; message?: string; param?: string }) => e);
    // A chat prompt (sent as token ids, which the engine names `prompt`) that exactly fills the context: the client sent messages.
    const full = await failure(openai.chat.completions.create({ model: "arbor-tiny", messages: [{ role: "user", content: "x".repeat(1020) }], max_tokens: 3 }));
    expect(full).toMatchObject({ status: 400, param: "messages", message: expect.stringMatching(/^400 messages: the prompt has \d+ tokens, over the context of 1024/) });
    // Messages: the system prompt is the chat request's first message, and Anthropic's paths are dotted.
    const anth = await failure(anthropic.messages.create({ model: "arbor-tiny", max_tokens: 3, system: "Be brief.", messages: [{ role: "user", content: long }] }));
    expect(anth).toMatchObject({ status: 400, message: expect.stringContaining('"message":"messages.0.content: has at least 2000 tokens') });
    const toolResult = await failure(
      anthropic.messages.create({
        model: "arbor-tiny",
        max_tokens: 3,
        messages: [
          { role: "user", content: "hi" },
          { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "f", input: {} }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: long }] },
        ],
      }),
    );
    expect(toolResult.message).toContain('"message":"messages.2.content.0.content: has at least 2000 tokens');
    // Responses: instructions and a string input.
    const resp = await failure(openai.responses.create({ model: "arbor-tiny", instructions: "Be brief.", input: long, max_output_tokens: 3 }));
    expect(resp).toMatchObject({ status: 400, param: "input", message: expect.stringMatching(/^400 input: has at least 2000 tokens/) });
    // Streamed, refused before the stream begins.
    const streamed = await failure(openai.responses.create({ model: "arbor-tiny", instructions: "Be brief.", input: long, max_output_tokens: 3, stream: true }));
    expect(streamed).toMatchObject({ status: 400, param: "input" });
    const items = await failure(openai.responses.create({ model: "arbor-tiny", input: [{ role: "user", content: "hi" }, { role: "user", content: long }], max_output_tokens: 3 }));
    expect(items).toMatchObject({ status: 400, param: "input.1.content" });
    expect(callsOf("tp-names")).toEqual([]);
  });

  it("passes calls through unchanged when the token path is off", async () => {
    const proxy = await startFaultProxy(engine.url);
    const local: Call[] = [];
    const gw = createGateway({ backends: [createArborBackend({ name: "e0", url: `${proxy.root}/v1` })], sink: { recordCall: async (c) => void local.push(c) }, tokenPath: false });
    try {
      const base = await gw.listen("127.0.0.1", 0);
      const client = new OpenAI({ baseURL: `${base}/p/tp-off/v1`, apiKey: "unused", maxRetries: 0 });
      await client.chat.completions.create({ model: "arbor-tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 3 });
      // The prompt is tokenized once to check max_tokens against the context (it fits: the body goes as sent); the
      // backend asks once which model name the engine serves (no name configured), then forwards the call.
      expect(proxy.seen.map((r) => r.path)).toEqual(["/tokenize", "/v1/models", "/v1/chat/completions"]);
      expect(local[0]!.maxTokensClamped).toBeUndefined();
      expect(local).toHaveLength(1);
    } finally {
      await gw.close();
      await proxy.close();
    }
  });
});
