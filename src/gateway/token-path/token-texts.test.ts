// Per-token texts decoded in parallel batches: in order, aborted with the call, and without Node's listener-leak
// warning however many tokens an answer has (each request listens for the abort, as backends/http-text.ts does).
import { getEventListeners } from "node:events";
import OpenAI from "openai";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createArborBackend } from "../../backends/vllm.js";
import type { ListeningEngineServer } from "../../engine/server.js";
import { ScriptedExecutor } from "../../testing/scripted-executor.js";
import { startScriptedEngine } from "../../testing/weather-tools-fixture.js";
import { createGateway, type Gateway } from "../server.js";
import { DECODE_PARALLEL, tokenTexts, type DecodeIds } from "./token-texts.js";

let warnings: Error[] = [];
const onWarning = (w: Error): void => void warnings.push(w);
beforeEach(() => {
  warnings = [];
  process.on("warning", onWarning);
});
afterEach(() => {
  process.off("warning", onWarning);
});
/** Warnings are emitted on a later tick than the listener that caused them. */
const settled = (): Promise<void> => new Promise((r) => setImmediate(r));

/** A decoder that holds each request until released, listening for the abort while it waits. */
function heldDecoder(): { decode: DecodeIds; pending: { ids: number[]; signal: AbortSignal }[]; release(): void } {
  const pending: { ids: number[]; signal: AbortSignal; resolve: (t: string) => void }[] = [];
  const decode: DecodeIds = (ids, signal) =>
    new Promise<string>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      signal.addEventListener("abort", () => reject(signal.reason), { once: true });
      pending.push({ ids, signal, resolve });
    });
  return { decode, pending, release: () => pending.splice(0).forEach((p) => p.resolve(`<${p.ids.join(",")}>`)) };
}

describe("tokenTexts", () => {
  it("decodes each id on its own, in order, in batches, leaving no listener on the call's signal", async () => {
    const call = new AbortController();
    const held = heldDecoder();
    const ids = Array.from({ length: DECODE_PARALLEL * 2 + 3 }, (_, i) => i + 100);
    const texts = tokenTexts(ids, held.decode, call.signal);
    for (const size of [DECODE_PARALLEL, DECODE_PARALLEL, 3]) {
      await settled();
      expect(held.pending).toHaveLength(size);
      // The batch's requests listen on their own signal; the call's holds one listener for the batch.
      expect(getEventListeners(call.signal, "abort")).toHaveLength(1);
      held.release();
    }
    expect(await texts).toEqual(ids.map((id) => `<${id}>`));
    expect(getEventListeners(call.signal, "abort")).toHaveLength(0);
    await settled();
    expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning")).toEqual([]);
  });

  it("aborts the batch's requests when the call is aborted, with the call's reason", async () => {
    const call = new AbortController();
    const held = heldDecoder();
    const texts = tokenTexts([1, 2, 3], held.decode, call.signal);
    await settled();
    call.abort(new Error("client left"));
    await expect(texts).rejects.toThrow("client left");
    expect(held.pending.every((p) => p.signal.aborted)).toBe(true);
    const already = heldDecoder();
    await expect(tokenTexts([1], already.decode, AbortSignal.abort(new Error("gone")))).rejects.toThrow("gone");
  });
});

describe("a call with logprobs and many output tokens through the gateway", () => {
  let engine: ListeningEngineServer;
  let gateway: Gateway;
  let url: string;
  beforeAll(async () => {
    engine = await startScriptedEngine(new ScriptedExecutor(() => "abcdefghijklmnopqrstuvwxyz0123456789"));
    gateway = createGateway({ backends: [createArborBackend({ name: "arbor", url: `${engine.url}/v1` })], sink: { recordCall: async () => {} } });
    url = await gateway.listen("127.0.0.1", 0);
  });
  afterAll(async () => {
    await gateway?.close();
    await engine?.close();
  });

  it("answers every token's logprob, plain and streamed, without Node's listener-leak warning", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/many-tokens/v1`, apiKey: "unused", maxRetries: 0 });
    const plain = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }], logprobs: true });
    const tokens = plain.choices[0]!.logprobs!.content!.map((t) => t.token);
    expect(tokens.length).toBeGreaterThan(DECODE_PARALLEL + 10);
    expect(tokens.join("")).toMatch(new RegExp(`^${plain.choices[0]!.message.content}`));
    const stream = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }], logprobs: true, stream: true });
    let streamed = "";
    for await (const chunk of stream) streamed += (chunk.choices[0]?.logprobs?.content ?? []).map((t) => t.token).join("");
    expect(streamed).toBe(tokens.join(""));
    await settled();
    expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning")).toEqual([]);
  });
});
