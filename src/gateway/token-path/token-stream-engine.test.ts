// Streamed token-path calls against a scripted vLLM-shaped engine (byte-level token ids): characters
// split over several tokens reach the client whole, and an engine failing mid-stream ends the
// client's stream with an error event and records nothing.
import Fastify, { type FastifyInstance } from "fastify";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createVllmBackend } from "../../backends/vllm.js";
import type { Call } from "../../core/types.js";
import { createGateway, type Gateway } from "../server.js";

let engine: FastifyInstance;
let gateway: Gateway;
let url: string;
const calls: Call[] = [];
// What the scripted engine generates next: the output bytes, then how it ends.
let script: { out: string; end: "stop" | "error" } = { out: "", end: "stop" };

const bytes = (s: string): number[] => [...Buffer.from(s, "utf8")];
const EOS = 0;

beforeAll(async () => {
  engine = Fastify();
  engine.post("/tokenize", async (req) => {
    const b = req.body as { messages?: { role: string; content: string }[]; prompt?: string };
    const text = b.messages ? b.messages.map((m) => `<${m.role}>${m.content}`).join("") + "<assistant>" : (b.prompt ?? "");
    return { tokens: bytes(text), max_model_len: 4096 };
  });
  // EOS decodes to "\u0000": the gateway must leave a final stop token out of the text itself.
  engine.post("/detokenize", async (req) => ({ prompt: Buffer.from((req.body as { tokens: number[] }).tokens).toString("utf8") }));
  engine.post("/v1/completions", (req, reply) => {
    const body = req.body as { prompt: number[]; stream: boolean };
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { "content-type": "text/event-stream" });
    const send = (o: unknown): boolean => res.write(`data: ${typeof o === "string" ? o : JSON.stringify(o)}\n\n`);
    const choice = (ids: number[], extra: object = {}): object => ({ id: "cmpl-x", object: "text_completion", choices: [{ index: 0, text: "", logprobs: { token_logprobs: ids.map(() => -0.5) }, token_ids: ids, finish_reason: null, ...extra }] });
    const out = bytes(script.out);
    send(choice(out.slice(0, 1), { prompt_token_ids: body.prompt }));
    for (const id of out.slice(1)) send(choice([id]));
    if (script.end === "error") send({ error: { message: "engine exploded", type: "InternalServerError", code: 500 } });
    else send(choice([EOS], { finish_reason: "stop" }));
    send("[DONE]");
    res.end();
  });
  const engineUrl = await engine.listen({ host: "127.0.0.1", port: 0 });
  gateway = createGateway({ backends: [createVllmBackend({ name: "v", url: `${engineUrl}/v1` })], sink: { recordCall: async (c) => void calls.push(c) } });
  url = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
  await engine?.close();
});

const client = (p: string): OpenAI => new OpenAI({ baseURL: `${url}/p/${p}/v1`, apiKey: "unused", maxRetries: 0 });

describe("streamed token path on a vLLM-shaped engine", () => {
  it("multi-byte characters split over byte tokens arrive whole; the stop token adds no text", async () => {
    script = { out: "añ€😀", end: "stop" };
    const stream = await client("utf8").chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 64, stream: true });
    const deltas: string[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta.content;
      if (d) deltas.push(d);
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(deltas.join("")).toBe("añ€😀");
    expect(deltas.some((d) => d.includes("\uFFFD"))).toBe(false);
    expect(finish).toBe("stop");
    const [call] = calls.filter((c) => c.programId === "utf8") as [Call];
    expect(call.outputTokenIds).toEqual([...bytes("añ€😀"), EOS]);
    expect(call.outputText).toBe("añ€😀");
    // vLLM reports no weights version: recorded as 0, as on the non-streamed token path.
    expect(call.policyVersion).toBe(0);
    expect(call.promptTokenIds).toEqual(bytes("<user>hi<assistant>"));
  });

  it("an engine failing mid-stream ends the client's stream with an error; nothing is recorded", async () => {
    script = { out: "partial", end: "error" };
    const n = calls.length;
    const stream = await client("boom").chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 64, stream: true });
    let content = "";
    const err = await (async () => {
      for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? "";
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(String(err)).toContain("engine exploded");
    expect("partial".startsWith(content)).toBe(true);
    expect(calls.length).toBe(n);
    expect(gateway.table.get("boom")).toBeUndefined();
  });
});
