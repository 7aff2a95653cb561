// Streamed calls on the token path, against the real built-in engine (tiny policy on llama.cpp)
// through Arbor's token backend: the gateway builds the prompt from the program's history, the
// engine streams token ids, and the gateway writes OpenAI / Anthropic / Responses streams itself.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TokenBackend } from "../../backends/backend.js";
import { createArborBackend } from "../../backends/vllm.js";
import type { Call } from "../../core/types.js";
import type { ListeningEngineServer } from "../../engine/server.js";
import { abortMidStream, refusedBeforeStream, startTinyEngine, traceOf, type TinyEngine } from "../../testing/real-engine-fixture.js";
import { createGateway, type Gateway } from "../server.js";

let tiny: TinyEngine;
let engine: ListeningEngineServer;
let gateway: Gateway;
let url: string;
const calls: Call[] = [];
// What the gateway asked of the engine: token streams only, never a chat/completions passthrough.
const used = { generateStream: 0, passthrough: 0 };

beforeAll(async () => {
  tiny = await startTinyEngine("arbor-token-stream-", { policyVersion: 6 });
  engine = tiny.engine;
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
  gateway = createGateway({ backends: [counted], sink: { recordCall: async (c) => void calls.push(c) } });
  url = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
  await tiny?.close();
});

const callsOf = (programId: string): Call[] => calls.filter((c) => c.programId === programId);
const openai = (program: string): OpenAI => new OpenAI({ baseURL: `${url}/p/${program}/v1`, apiKey: "unused", maxRetries: 0 });

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
    await abortMidStream({ engine, gateway, calls }, openai("gone"), "gone");
    // The engine is free again: the program's next call is served (and starts afresh).
    const next = await streamChat(openai("gone"), { model: "arbor-tiny", messages: [{ role: "user", content: "Hi" }], max_tokens: 4, seed: 2 });
    expect(next.finish).not.toBeNull();
    expect(callsOf("gone")).toHaveLength(1);
  });

  it("an engine refusal before the stream starts reaches the client with its status; nothing is recorded", async () => {
    await refusedBeforeStream({ gateway, calls }, openai("refused"), "refused");
  });
});
