// Black-box agents send their vendor's model names and max_tokens defaults (64,000 and more) whatever
// serves them. On every surface (OpenAI chat and completions, Responses, Anthropic Messages; plain
// and streamed), driven by the official clients against a real gateway and engine: the asked model
// name is recorded beside the served one, and a budget larger than the context leaves is clamped to
// what it leaves and recorded (maxTokensPolicy clamp) or refused with a 400 naming the client's field
// (refuse), recording nothing. Passthrough calls are fitted alike where the backend has the engine's
// tokenizer, and reach the engine as sent where it has none.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBuiltinBackend } from "../backends/builtin.js";
import { createArborBackend } from "../backends/vllm.js";
import { GatewayConfigSchema } from "../core/config.js";
import type { Call } from "../core/types.js";
import { startTinyEngine, type TinyEngine } from "../testing/real-engine-fixture.js";
import { createGateway, type Gateway, type GatewayOptions } from "./server.js";

const SERVED = "calc-policy";
// A small context keeps the clamped generations short (llama.cpp rounds it up; the engine reports its own).
const CONTEXT_ASKED = 160;
let context: number;
const ASKED = 64_000;
let tiny: TinyEngine;
const gateways: Gateway[] = [];
const calls: Call[] = [];
let clampUrl: string;
let refuseUrl: string;

/** A gateway in front of the tiny engine: Arbor's token backend, or (`passthrough`) a plain one without its tokenizer. */
async function gateway(opts: Partial<GatewayOptions>, passthrough = false): Promise<string> {
  const backend = passthrough
    ? createBuiltinBackend({ name: "p0", url: `${tiny.engine.url}/v1`, model: SERVED })
    : createArborBackend({ name: "t0", url: `${tiny.engine.url}/v1`, model: SERVED });
  const g = createGateway({ backends: [backend], sink: { recordCall: async (c) => void calls.push(c) }, ...opts });
  gateways.push(g);
  return g.listen("127.0.0.1", 0);
}

beforeAll(async () => {
  tiny = await startTinyEngine("arbor-max-tokens-", { servedModelName: SERVED, contextSize: CONTEXT_ASKED });
  const models = (await (await fetch(`${tiny.engine.url}/v1/models`)).json()) as { data: { max_model_len: number }[] };
  context = models.data[0]!.max_model_len;
  expect(context).toBeLessThan(1024);
  clampUrl = await gateway({});
  refuseUrl = await gateway({ maxTokensPolicy: "refuse" });
});

afterAll(async () => {
  for (const g of gateways) await g.close();
  await tiny?.close();
});

const openai = (url: string, program: string) => new OpenAI({ baseURL: `${url}/p/${program}/v1`, apiKey: "unused", maxRetries: 0 });
const anthropic = (url: string, program: string) => new Anthropic({ baseURL: `${url}/p/${program}`, apiKey: "unused", maxRetries: 0 });
const only = (program: string): Call => {
  const mine = calls.filter((c) => c.programId === program);
  expect(mine).toHaveLength(1);
  return mine[0]!;
};

/** One call per surface and mode, each asking for ASKED tokens under its own field and model name. */
const SURFACES: { name: string; field: string; model: string; send(url: string, program: string): Promise<unknown> }[] = [
  {
    name: "chat",
    field: "max_tokens",
    model: "gpt-4o-mini",
    send: (u, p) => openai(u, p).chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: ASKED, seed: 1 }),
  },
  {
    name: "chat streamed",
    field: "max_completion_tokens",
    model: "o4-mini",
    send: async (u, p) => {
      const s = await openai(u, p).chat.completions.create({ model: "o4-mini", messages: [{ role: "user", content: "hi" }], max_completion_tokens: ASKED, seed: 1, stream: true });
      for await (const chunk of s) void chunk;
    },
  },
  {
    name: "completions",
    field: "max_tokens",
    model: "davinci-002",
    send: (u, p) => openai(u, p).completions.create({ model: "davinci-002", prompt: "1+1=", max_tokens: ASKED, seed: 1 }),
  },
  {
    name: "completions streamed",
    field: "max_tokens",
    model: "babbage-002",
    send: async (u, p) => {
      const s = await openai(u, p).completions.create({ model: "babbage-002", prompt: "1+1=", max_tokens: ASKED, seed: 1, stream: true });
      for await (const chunk of s) void chunk;
    },
  },
  {
    name: "responses",
    field: "max_output_tokens",
    model: "gpt-5",
    send: (u, p) => openai(u, p).responses.create({ model: "gpt-5", input: "hi", max_output_tokens: ASKED }),
  },
  {
    name: "responses streamed",
    field: "max_output_tokens",
    model: "gpt-5-mini",
    send: async (u, p) => {
      const s = await openai(u, p).responses.create({ model: "gpt-5-mini", input: "hi", max_output_tokens: ASKED, stream: true });
      for await (const event of s) void event;
    },
  },
  {
    name: "messages",
    field: "max_tokens",
    model: "claude-sonnet-4-5",
    // The SDK wants an explicit timeout for a non-streamed call this large (the CLIs stream).
    send: (u, p) => anthropic(u, p).messages.create({ model: "claude-sonnet-4-5", max_tokens: ASKED, messages: [{ role: "user", content: "hi" }] }, { timeout: 60_000 }),
  },
  {
    name: "messages streamed",
    field: "max_tokens",
    model: "claude-haiku-4-5",
    send: async (u, p) => {
      const s = await anthropic(u, p).messages.create({ model: "claude-haiku-4-5", max_tokens: ASKED, messages: [{ role: "user", content: "hi" }], stream: true });
      for await (const event of s) void event;
    },
  },
];

describe("max_tokens larger than the context leaves, on every surface", () => {
  for (const [i, s] of SURFACES.entries()) {
    it(`${s.name}: clamped to what the context leaves, recorded with the asked model name`, async () => {
      const program = `clamp-${i}`;
      await s.send(clampUrl, program);
      const call = only(program);
      const left = context - call.promptTokenIds.length;
      expect(call.maxTokensClamped).toEqual({ asked: ASKED, granted: left });
      expect(call.outputTokenIds.length).toBeLessThanOrEqual(left);
      expect(call.requestedModel).toBe(s.model);
      expect(call.servedModel).toBe(SERVED);
    });

    it(`${s.name}: refused with a 400 naming ${s.field} under maxTokensPolicy refuse, recording nothing`, async () => {
      const program = `refuse-${i}`;
      const e = (await s.send(refuseUrl, program).then(
        () => undefined,
        (x: unknown) => x,
      )) as { status?: number; message?: string } | undefined;
      expect(e?.status).toBe(400);
      expect(e?.message).toMatch(new RegExp(`${s.field}: is ${ASKED}, more than the \\d+ tokens the context leaves \\(backend 't0' has a context of ${context} tokens`));
      expect(calls.filter((c) => c.programId === program)).toEqual([]);
    });
  }

  it("a budget that fits is served as asked under either policy, with nothing recorded about a clamp", async () => {
    for (const [url, program] of [
      [clampUrl, "fits-clamp"],
      [refuseUrl, "fits-refuse"],
    ] as const) {
      await openai(url, program).chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 3 });
      const call = only(program);
      expect(call.maxTokensClamped).toBeUndefined();
      expect(call.outputTokenIds.length).toBeLessThanOrEqual(3);
      expect(call.requestedModel).toBe("gpt-4o-mini");
    }
  });

  it("a budget Arbor's black-box proxy lowered records the budget the agent asked for (its header), whichever clamped last", async () => {
    const proxied = (program: string, asked: string) => new OpenAI({ baseURL: `${clampUrl}/p/${program}/v1`, apiKey: "unused", maxRetries: 0, defaultHeaders: { "x-arbor-max-tokens-asked": asked } });
    // The proxy lowered 5000 to 3: served with 3, recorded as asked 5000.
    await proxied("proxy-cap", "5000").chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 3 });
    expect(only("proxy-cap").maxTokensClamped).toEqual({ asked: 5000, granted: 3 });
    // Lowered by the proxy, then by the gateway to what the context leaves: asked is still the agent's.
    await proxied("proxy-then-context", "90000").chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: ASKED });
    const call = only("proxy-then-context");
    expect(call.maxTokensClamped).toEqual({ asked: 90000, granted: context - call.promptTokenIds.length });
    const e = (await proxied("proxy-bad", "lots").chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 3 }).catch((x: unknown) => x)) as { status?: number; message?: string };
    expect(e.status).toBe(400);
    expect(e.message).toMatch(/x-arbor-max-tokens-asked: must be one positive integer, got "lots"/);
  });

  it("passthrough to a backend with the engine's tokenizer: the budget is fitted alike (clamped and recorded, or refused)", async () => {
    const clamp = await gateway({ tokenPath: false });
    const refuse = await gateway({ tokenPath: false, maxTokensPolicy: "refuse" });
    await openai(clamp, "pt-clamp-0").chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: ASKED, seed: 1 });
    const events = await anthropic(clamp, "pt-clamp-1").messages.create({ model: "claude-haiku-4-5", max_tokens: ASKED, messages: [{ role: "user", content: "hi" }], stream: true });
    for await (const e of events) void e;
    for (const program of ["pt-clamp-0", "pt-clamp-1"]) {
      const call = only(program);
      const left = context - call.promptTokenIds.length;
      expect(call.maxTokensClamped, program).toEqual({ asked: ASKED, granted: left });
      expect(call.outputTokenIds.length).toBeLessThanOrEqual(left);
    }
    const e = (await openai(refuse, "pt-refuse")
      .chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_completion_tokens: ASKED, stream: true })
      .catch((x: unknown) => x)) as { status?: number; message?: string };
    expect(e.status).toBe(400);
    expect(e.message).toMatch(/max_completion_tokens: is 64000, more than the \d+ tokens the context leaves/);
    expect(calls.filter((c) => c.programId === "pt-refuse")).toEqual([]);
  });

  it("passthrough: the budget reaches the engine as sent (no prompt length known), the asked name is still recorded", async () => {
    const url = await gateway({}, true);
    const e = (await openai(url, "pass-big")
      .chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: ASKED })
      .catch((x: unknown) => x)) as { status?: number; message?: string };
    // The engine's own refusal, relayed.
    expect(e.status).toBe(400);
    expect(calls.filter((c) => c.programId === "pass-big")).toEqual([]);
    await anthropic(url, "pass-ok").messages.create({ model: "claude-opus-4-1", max_tokens: 3, messages: [{ role: "user", content: "hi" }] });
    expect(only("pass-ok")).toMatchObject({ requestedModel: "claude-opus-4-1", servedModel: SERVED });
  });

  it("config: gateway.maxTokensPolicy is clamp by default, refuse by choice, nothing else", () => {
    expect(GatewayConfigSchema.parse({}).maxTokensPolicy).toBe("clamp");
    expect(GatewayConfigSchema.parse({ maxTokensPolicy: "refuse" }).maxTokensPolicy).toBe("refuse");
    expect(() => GatewayConfigSchema.parse({ maxTokensPolicy: "truncate" })).toThrow(/maxTokensPolicy/);
    expect(() => createGateway({ backends: [], maxTokensPolicy: "truncate" as never })).toThrow(/^maxTokensPolicy: must be one of clamp, refuse/);
  });
});
