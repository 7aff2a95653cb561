import { readFileSync } from "node:fs";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFixtureServer, type FixtureServer } from "../../testing/fixture-server.js";
import { createOpenAiBackend } from "../../backends/openai.js";
import type { Call } from "../../core/types.js";
import { createGateway, type Gateway } from "../server.js";
import { textOnlyTrace } from "./text-only.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const fixture: any = JSON.parse(readFileSync(new URL("../../backends/fixtures/openai.json", import.meta.url), "utf8"));

let server: FixtureServer;
let gw: Gateway;
let url: string;
const calls: Call[] = [];

beforeAll(async () => {
  server = await startFixtureServer((r) => {
    if (r.method === "POST" && r.path === "/v1/chat/completions") return { json: fixture.chat };
    if (r.path === "/v1/models") return { json: fixture.models };
    return undefined;
  });
  gw = createGateway({ backends: [createOpenAiBackend({ name: "provider", url: `${server.root}/v1` })], sink: { recordCall: async (c) => void calls.push(c) } });
  url = await gw.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gw?.close();
  await server?.close();
});

describe("generic openai backend", () => {
  it("records the call with its text only, marked not trainable, and answers the client as the provider did", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/t1/v1`, apiKey: "unused", maxRetries: 0 });
    const { data: res, response } = await client.chat.completions.create({ model: "gpt-x", messages: [{ role: "user", content: "Capital of France?" }] }).withResponse();
    expect(res.choices[0]!.message.content).toBe("Paris.");
    expect(calls).toHaveLength(1);
    const call = calls[0]!;
    expect(response.headers.get("x-arbor-call-id")).toBe(call.id);
    expect(call).toMatchObject({
      programId: "t1",
      index: 0,
      backend: "provider",
      outputText: "Paris.",
      finishReason: "stop",
      promptTokenIds: [],
      outputTokenIds: [],
      logprobs: [],
      trainable: false,
      messages: [{ role: "user", content: "Capital of France?" }],
    });
    // The passthrough keeps the client's request (no token-level fields are needed from a provider).
    expect(server.requests.at(-1)?.body).toEqual({ model: "gpt-x", messages: [{ role: "user", content: "Capital of France?" }] });
    await client.chat.completions.create({ model: "gpt-x", messages: [{ role: "user", content: "Again?" }] });
    expect(calls.map((c) => [c.index, c.trainable])).toEqual([
      [0, false],
      [1, false],
    ]);
  });

  it("reads completions text too, and refuses an answer without choices", () => {
    expect(textOnlyTrace({ choices: [{ text: "abc", finish_reason: "length" }] })).toMatchObject({ outputText: "abc", finishReason: "length", outputTokenIds: [] });
    expect(() => textOnlyTrace({ object: "chat.completion" })).toThrow(/no choices\[0\]/);
  });
});
