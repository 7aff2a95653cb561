// The gateway in front of the real built-in engine (tiny policy on llama.cpp), driven by the
// official `openai` client as agents drive it.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Call } from "../core/types.js";
import { Vocab } from "../model/vocab.js";
import { startRealEngineGateway, type RealEngineGateway } from "../testing/real-engine-fixture.js";

let fx: RealEngineGateway;
let calls: Call[];
let url: string;

beforeAll(async () => {
  fx = await startRealEngineGateway(7);
  ({ calls, url } = fx);
});

afterAll(async () => {
  await fx?.close();
});

describe("gateway + real engine + openai client", () => {
  it("records exactly the tokens the engine returned, addressed by URL path", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/prog-a/v1`, apiKey: "unused", maxRetries: 0 });
    const res = await client.chat.completions.create({
      model: "arbor-tiny",
      messages: [{ role: "user", content: "What is 2+3?" }],
      max_tokens: 16,
      temperature: 1,
      seed: 4,
      logprobs: true,
    });
    const raw = res as unknown as { prompt_token_ids: number[]; policy_version: number; choices: { token_ids: number[] }[] };
    const call = calls.at(-1)!;
    expect(call.programId).toBe("prog-a");
    expect(call.index).toBe(0);
    expect(call.backend).toBe("e0");
    expect(call.policyVersion).toBe(7);
    expect(raw.policy_version).toBe(7);
    expect(call.promptTokenIds).toEqual(raw.prompt_token_ids);
    expect(call.outputTokenIds).toEqual(raw.choices[0]!.token_ids);
    expect(call.logprobs).toEqual(res.choices[0]!.logprobs!.content!.map((c) => c.logprob));
    expect(call.outputText).toBe(res.choices[0]!.message.content);
    // The engine's ids are the policy's own vocabulary: they decode to the text the client saw.
    const vocab = new Vocab();
    const stops = new Set([vocab.eosId, vocab.controlId("<|end|>")]);
    expect(vocab.decode(call.outputTokenIds.filter((id) => !stops.has(id)))).toBe(res.choices[0]!.message.content);
  });

  it("addresses programs by header too, numbering each program's calls", async () => {
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, defaultHeaders: { "x-arbor-program": "prog-b" } });
    for (let i = 0; i < 2; i++) {
      await client.completions.create({ model: "arbor-tiny", prompt: "1+1=", max_tokens: 4, seed: i });
    }
    expect(calls.filter((c) => c.programId === "prog-b").map((c) => c.index)).toEqual([0, 1]);
  });

  it("serves Anthropic Messages to the real @anthropic-ai/sdk, recording the call token-in/token-out", async () => {
    const anthropic = new Anthropic({ baseURL: `${url}/p/prog-c`, apiKey: "unused", maxRetries: 0 });
    const msg = await anthropic.messages.create({
      model: "arbor-tiny",
      max_tokens: 12,
      system: "You are terse.",
      messages: [{ role: "user", content: "What is 2+3?" }],
    });
    const call = calls.filter((c) => c.programId === "prog-c").at(-1)!;
    expect(msg.type).toBe("message");
    expect(msg.role).toBe("assistant");
    const text = msg.content.map((b) => (b.type === "text" ? b.text : "")).join("");
    expect(text).toBe(call.outputText);
    expect(["end_turn", "max_tokens"]).toContain(msg.stop_reason);
    expect(msg.usage.output_tokens).toBe(call.outputTokenIds.length);
    expect(call.messages.map((m) => m.role)).toEqual(["system", "user"]);
    // Bad input is answered in Anthropic's error shape, naming the field.
    await expect(
      anthropic.messages.create({ model: "arbor-tiny", max_tokens: 0, messages: [{ role: "user", content: "x" }] }),
    ).rejects.toMatchObject({ status: 400, error: { type: "error", error: { type: "invalid_request_error", message: expect.stringContaining("max_tokens") } } });
  });
});
