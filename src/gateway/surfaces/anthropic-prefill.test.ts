// Anthropic's prefill through the gateway: a final assistant message is continued, not closed as a turn,
// on the token path (the gateway renders the prompt with the turn left open, vLLM's continue_final_message)
// and on the passthrough to Arbor's engine (its chat route renders it so). The call is recorded with the
// prefill in its prompt ids and only the continuation as output; the answer holds only the continuation,
// as Anthropic's does; the turn sent back whole continues the program's context. OpenAI chat requests get
// the same through vLLM's continue_final_message, refused where vLLM refuses it.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBuiltinBackend } from "../../backends/builtin.js";
import { createBackend } from "../../backends/registry.js";
import type { Call } from "../../core/types.js";
import { startEngineServer, type ListeningEngineServer } from "../../engine/server.js";
import { ScriptedExecutor } from "../../testing/scripted-executor.js";
import { createGateway, type Gateway } from "../server.js";

let executor: ScriptedExecutor;
let engine: ListeningEngineServer;
const gateways: Gateway[] = [];
const urls: Record<"token" | "passthrough", string> = { token: "", passthrough: "" };
const calls: Call[] = [];

beforeAll(async () => {
  // The continuation depends on whether the prompt still holds the prefill's turn open.
  executor = new ScriptedExecutor((prompt) => (prompt.endsWith("The answer is") ? " 4." : prompt.endsWith("4.") ? " Sure." : "Plain answer."));
  engine = await startEngineServer({ name: "e0", modelPath: "", policyVersion: 1, sequences: 2, contextSize: 2048, maxWaiting: 8, executor });
  const backends = {
    token: createBackend({ type: "builtin", name: "e0", url: `${engine.url}/v1` }, { model: "arbor-tiny" }),
    passthrough: createBuiltinBackend({ name: "e0", url: `${engine.url}/v1` }),
  };
  for (const mode of ["token", "passthrough"] as const) {
    const gateway = createGateway({ backends: [backends[mode]], sink: { recordCall: async (c) => void calls.push(c) } });
    gateways.push(gateway);
    urls[mode] = await gateway.listen("127.0.0.1", 0);
  }
});

afterAll(async () => {
  for (const g of gateways) await g.close();
  await engine?.close();
});

const prefilled = [
  { role: "user" as const, content: "What is 2+2?" },
  { role: "assistant" as const, content: "The answer is" },
];

describe("Anthropic prefill: a final assistant message is continued", () => {
  for (const mode of ["token", "passthrough"] as const) {
    it(`${mode}: the engine continues inside the prefilled turn and the answer is only the continuation`, async () => {
      const client = new Anthropic({ baseURL: `${urls[mode]}/p/prefill-${mode}`, apiKey: "x", maxRetries: 0 });
      const res = await client.messages.create({ model: "arbor-tiny", max_tokens: 40, messages: prefilled });
      expect(executor.prompts.at(-1)).toBe("<|user|>What is 2+2?<|end|><|assistant|>The answer is");
      expect(res.content).toHaveLength(1);
      expect(res.content[0]).toMatchObject({ type: "text", text: " 4." });
      const call = calls.filter((c) => c.programId === `prefill-${mode}`).at(-1)!;
      // The prompt ids hold the prefill (the policy did not write it); the output ids only what it added.
      expect(call.outputText).toBe(" 4.");
      expect(call.messages.at(-1)).toMatchObject({ role: "assistant", content: "The answer is" });
    });
  }

  it("token path: the prefill's whole turn sent back continues the recorded context", async () => {
    const client = new Anthropic({ baseURL: `${urls.token}/p/prefill-next`, apiKey: "x", maxRetries: 0 });
    await client.messages.create({ model: "arbor-tiny", max_tokens: 40, messages: prefilled });
    const res = await client.messages.create({
      model: "arbor-tiny",
      max_tokens: 40,
      messages: [...prefilled.slice(0, 1), { role: "assistant", content: "The answer is 4." }, { role: "user", content: "Thanks" }],
    });
    expect(res.content).toMatchObject([{ type: "text", text: "Plain answer." }]);
    const [first, second] = calls.filter((c) => c.programId === "prefill-next");
    expect(second!.contextReset).toBeUndefined();
    expect(second!.promptTokenIds.slice(0, first!.promptTokenIds.length + first!.outputTokenIds.length)).toEqual([...first!.promptTokenIds, ...first!.outputTokenIds]);
  });

  it("token path: an answer cut off at max_tokens, sent back as the prefill, continues on the engine's own ids", async () => {
    const client = new Anthropic({ baseURL: `${urls.token}/p/prefill-cut`, apiKey: "x", maxRetries: 0 });
    const cut = await client.messages.create({ model: "arbor-tiny", max_tokens: 2, messages: prefilled });
    expect(cut.stop_reason).toBe("max_tokens");
    const text = (cut.content[0] as { text: string }).text;
    await client.messages.create({ model: "arbor-tiny", max_tokens: 40, messages: [prefilled[0]!, { role: "assistant", content: `The answer is${text}` }] });
    const [first, second] = calls.filter((c) => c.programId === "prefill-cut");
    expect(second!.contextReset).toBeUndefined();
    expect(second!.promptTokenIds).toEqual([...first!.promptTokenIds, ...first!.outputTokenIds]);
  });

  it("refuses a prefill ending in whitespace, as Anthropic does", async () => {
    const client = new Anthropic({ baseURL: `${urls.token}/p/prefill-ws`, apiKey: "x", maxRetries: 0 });
    const done = client.messages.create({ model: "arbor-tiny", max_tokens: 40, messages: [prefilled[0]!, { role: "assistant", content: "The answer is " }] });
    await expect(done).rejects.toMatchObject({ status: 400, error: { error: { message: "messages: final assistant content cannot end with trailing whitespace" } } });
  });
});

describe("OpenAI chat: vLLM's continue_final_message", () => {
  const body = (extra: Record<string, unknown>, messages: unknown[] = prefilled) => ({ model: "arbor-tiny", max_tokens: 40, messages, ...extra }) as never;

  for (const mode of ["token", "passthrough"] as const) {
    it(`${mode}: serves it with add_generation_prompt false or left out; refuses it as vLLM does, naming the field`, async () => {
      const client = new OpenAI({ baseURL: `${urls[mode]}/p/cfm-${mode}/v1`, apiKey: "x", maxRetries: 0 });
      for (const extra of [{ continue_final_message: true, add_generation_prompt: false }, { continue_final_message: true }]) {
        const res = (await client.chat.completions.create(body(extra))) as OpenAI.Chat.Completions.ChatCompletion;
        expect(res.choices[0]!.message.content).toBe(" 4.");
        expect(executor.prompts.at(-1)).toBe("<|user|>What is 2+2?<|end|><|assistant|>The answer is");
      }
      await expect(client.chat.completions.create(body({ continue_final_message: true, add_generation_prompt: true }))).rejects.toMatchObject({
        status: 400,
        param: "continue_final_message",
        message: expect.stringContaining("Cannot set both `continue_final_message` and `add_generation_prompt` to True."),
      });
      await expect(client.chat.completions.create(body({ continue_final_message: true }, prefilled.slice(0, 1)))).rejects.toMatchObject({
        status: 400,
        param: "continue_final_message",
      });
    });
  }
});
