// Streamed calls on the token path, against the real built-in engine (tiny policy on llama.cpp)
// through Arbor's token backend: the gateway builds the prompt from the program's history, the
// engine streams token ids, and the gateway writes OpenAI / Anthropic / Responses streams itself.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { TokenBackend } from "../../backends/backend.js";
import { createArborBackend } from "../../backends/vllm.js";
import type { Call } from "../../core/types.js";
import { startEngineServer, type ListeningEngineServer } from "../../engine/server.js";
import { ensurePolicy } from "../../model/policy.js";
import { createGateway, type Gateway } from "../server.js";

let dir: string;
let engine: ListeningEngineServer;
let gateway: Gateway;
let url: string;
const calls: Call[] = [];
// What the gateway asked of the engine: token streams only, never a chat/completions passthrough.
const used = { generateStream: 0, passthrough: 0 };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-token-stream-"));
  const policy = ensurePolicy(dir, { seed: 9, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 1024 });
  engine = await startEngineServer({ name: "e0", modelPath: policy.path, policyVersion: 6, sequences: 2, contextSize: 1024, maxWaiting: 8 });
  const real = createArborBackend({ name: "e0", url: `${engine.url}/v1` });
  const counted: TokenBackend & Record<string, unknown> = {
    ...real,
    generateStream: (req) => {
      used.generateStream++;
      return (real.generateStream as NonNullable<TokenBackend["generateStream"]>)(req);
    },
    chatCompletionsStream: () => {
      used.passthrough++;
      throw new Error("the streamed call was relayed instead of taking the token path");
    },
    completionsStream: () => {
      used.passthrough++;
      throw new Error("the streamed call was relayed instead of taking the token path");
    },
  };
  gateway = createGateway({ backends: [counted], sink: { recordCall: (c) => calls.push(c) } });
  url = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
  await engine?.close();
  rmSync(dir, { recursive: true, force: true });
});

const callsOf = (programId: string): Call[] => calls.filter((c) => c.programId === programId);
const openai = (program: string): OpenAI => new OpenAI({ baseURL: `${url}/p/${program}/v1`, apiKey: "unused", maxRetries: 0 });
const traceOf = (c: Call): unknown => ({ p: c.promptTokenIds, o: c.outputTokenIds, l: c.logprobs, t: c.outputText, f: c.finishReason, v: c.policyVersion });

async function abortedRequests(): Promise<number> {
  const text = await (await fetch(`${engine.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("vllm:request_success_total") && l.includes('finished_reason="abort"'));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

async function streamChat(client: OpenAI, req: OpenAI.ChatCompletionCreateParamsNonStreaming): Promise<{ content: string; finish: string | null; usage?: OpenAI.CompletionUsage; ids: number[]; lps: number[] }> {
  const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let content = "";
  let finish: string | null = null;
  let usage: OpenAI.CompletionUsage | undefined;
  const ids: number[] = [];
  const lps: number[] = [];
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (choice) {
      content += choice.delta.content ?? "";
      finish = choice.finish_reason ?? finish;
      ids.push(...((choice as unknown as { token_ids?: number[] }).token_ids ?? []));
      lps.push(...(choice.logprobs?.content ?? []).map((c) => c.logprob));
    }
    if (chunk.usage) usage = chunk.usage;
  }
  return { content, finish, ids, lps, ...(usage ? { usage } : {}) };
}

describe("streamed calls on the token path (real engine)", () => {
  it("chat: the streamed answer and its recorded call equal the non-streamed ones; the second turn continues history ‖ delta", async () => {
    const before = { ...used };
    const turn1 = [{ role: "user" as const, content: "Count to five." }];
    const req = { model: "arbor-tiny", max_tokens: 24, temperature: 1, seed: 11 };
    const plain = await openai("s-plain").chat.completions.create({ ...req, messages: turn1 });
    const streamed = await streamChat(openai("s-chat"), { ...req, messages: turn1 });
    expect(streamed.content).toBe(plain.choices[0]!.message.content);
    expect(streamed.finish).toBe(plain.choices[0]!.finish_reason);
    expect(streamed.usage).toEqual(plain.usage);
    // Not asked for: no token ids, no logprobs.
    expect(streamed.ids).toEqual([]);
    expect(streamed.lps).toEqual([]);
    const [p1] = callsOf("s-plain") as [Call];
    const [s1] = callsOf("s-chat") as [Call];
    expect(traceOf(s1)).toEqual(traceOf(p1));
    expect(s1).toMatchObject({ index: 0, backend: "e0", policyVersion: 6 });
    expect(s1.outputText).toBe(streamed.content);

    const turn2 = [...turn1, { role: "assistant" as const, content: streamed.content }, { role: "user" as const, content: "Now backwards." }];
    await openai("s-plain").chat.completions.create({ ...req, seed: 12, messages: turn2 });
    const second = await streamChat(openai("s-chat"), { ...req, seed: 12, messages: turn2, logprobs: true, return_token_ids: true } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const [, p2] = callsOf("s-plain") as [Call, Call];
    const [, s2] = callsOf("s-chat") as [Call, Call];
    expect(s2.contextReset).toBeUndefined();
    expect(s2.promptTokenIds.slice(0, s1.promptTokenIds.length + s1.outputTokenIds.length)).toEqual([...s1.promptTokenIds, ...s1.outputTokenIds]);
    expect(s2.promptTokenIds.length).toBeGreaterThan(s1.promptTokenIds.length + s1.outputTokenIds.length);
    expect(traceOf(s2)).toEqual(traceOf(p2));
    // Asked for: the chunks carry exactly the recorded ids and logprobs.
    expect(second.ids).toEqual(s2.outputTokenIds);
    expect(second.lps).toEqual(s2.logprobs);
    expect(gateway.table.get("s-chat")).toMatchObject({ calls: 2, inFlight: 0 });
    expect(used.generateStream - before.generateStream).toBe(2);
    expect(used.passthrough).toBe(0);
  });

  it("completions: streamed text, ids and logprobs equal the non-streamed call's", async () => {
    const req = { model: "arbor-tiny", prompt: "1+1=", max_tokens: 12, temperature: 1, seed: 5, logprobs: 0 };
    const plain = await openai("c-plain").completions.create(req);
    const stream = await openai("c-stream").completions.create({ ...req, stream: true, return_token_ids: true } as OpenAI.CompletionCreateParamsStreaming);
    let text = "";
    const ids: number[] = [];
    const lps: number[] = [];
    let prompt: number[] | undefined;
    for await (const chunk of stream) {
      const choice = chunk.choices[0]!;
      text += choice.text;
      ids.push(...((choice as unknown as { token_ids?: number[] }).token_ids ?? []));
      prompt ??= (choice as unknown as { prompt_token_ids?: number[] }).prompt_token_ids;
      lps.push(...(choice.logprobs?.token_logprobs ?? []));
    }
    expect(text).toBe(plain.choices[0]!.text);
    const [call] = callsOf("c-stream") as [Call];
    expect(traceOf(call)).toEqual(traceOf(callsOf("c-plain")[0]!));
    expect(ids).toEqual(call.outputTokenIds);
    expect(lps).toEqual(call.logprobs);
    expect(prompt).toEqual(call.promptTokenIds);
    expect(used.passthrough).toBe(0);
  });

  it("Anthropic messages.stream and OpenAI responses.stream ride on it", async () => {
    const anthropic = (p: string): Anthropic => new Anthropic({ baseURL: `${url}/p/${p}`, apiKey: "unused", maxRetries: 0 });
    const areq = { model: "arbor-tiny", max_tokens: 16, temperature: 0, messages: [{ role: "user" as const, content: "What is 2+3?" }] };
    const aplain = await anthropic("m-plain").messages.create(areq);
    const astream = await anthropic("m-stream").messages.stream(areq).finalMessage();
    expect(astream.content).toEqual(aplain.content);
    expect(astream.usage.output_tokens).toBe(aplain.usage.output_tokens);
    expect(callsOf("m-stream")).toHaveLength(1);
    expect(callsOf("m-stream")[0]!.promptTokenIds).toEqual(callsOf("m-plain")[0]!.promptTokenIds);

    const rreq = { model: "arbor-tiny", input: "What is 2+3?", instructions: "Be terse.", max_output_tokens: 12, temperature: 0 };
    const rplain = await openai("r-plain").responses.create(rreq);
    const rstream = openai("r-stream").responses.stream(rreq);
    let text = "";
    let terminal: OpenAI.Responses.Response | undefined;
    rstream.on("response.output_text.delta", (e) => (text += e.delta));
    rstream.on("event", (e) => {
      if (e.type === "response.completed" || e.type === "response.incomplete") terminal = e.response;
    });
    await rstream.finalResponse();
    expect(text).toBe(rplain.output_text);
    // The SDK's snapshot takes the final response from response.completed only; read the terminal event.
    expect(terminal?.status).toBe(rplain.status);
    expect(terminal?.usage).toMatchObject({ input_tokens: rplain.usage?.input_tokens, output_tokens: rplain.usage?.output_tokens });
    const [rcall] = callsOf("r-stream") as [Call];
    expect(traceOf(rcall)).toEqual(traceOf(callsOf("r-plain")[0]!));
    expect(used.passthrough).toBe(0);
  });

  it("a client abort mid-stream records nothing, frees the program and cancels the engine's request", async () => {
    const n = calls.length;
    const aborts = await abortedRequests();
    const stream = await openai("gone").chat.completions.create({
      model: "arbor-tiny", messages: [{ role: "user", content: "Talk a lot." }], max_tokens: 900, temperature: 1, seed: 1, stream: true,
    });
    let seen = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content !== undefined) seen++;
      if (seen >= 2) {
        stream.controller.abort();
        break;
      }
    }
    await vi.waitFor(async () => expect(await abortedRequests()).toBe(aborts + 1), { timeout: 5000 });
    await vi.waitFor(() => expect(gateway.table.get("gone")).toMatchObject({ calls: 0, inFlight: 0 }));
    expect(calls.length).toBe(n);
    // The engine is free again: the program's next call is served (and starts afresh).
    const next = await streamChat(openai("gone"), { model: "arbor-tiny", messages: [{ role: "user", content: "Hi" }], max_tokens: 4, seed: 2 });
    expect(next.finish).not.toBeNull();
    expect(callsOf("gone")).toHaveLength(1);
  });

  it("an engine refusal before the stream starts reaches the client with its status; nothing is recorded", async () => {
    const n = calls.length;
    const err = await openai("refused")
      .chat.completions.create({ model: "arbor-tiny", messages: [{ role: "user", content: "x" }], max_tokens: 100_000, stream: true })
      .then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    expect(calls.length).toBe(n);
    expect(gateway.table.get("refused")).toMatchObject({ calls: 0, inFlight: 0 });
  });
});
