// The official `openai` client's Responses API against the gateway's token path in front of a
// Qwen3-like model whose answers reason in `<think>…</think>` (the backend's `think` parser): the
// reasoning comes back as a reasoning item before the message, plain and streamed alike, and its
// tokens are counted in usage.output_tokens_details.reasoning_tokens.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reasoningParserNamed } from "../../backends/answer-parsers.js";
import type { ChatMessage } from "../../core/types.js";
import { CHATML_CONTROL, QWEN3_LIKE_TEMPLATE, QWEN_ADDED } from "../../testing/chat-template-fixtures.js";
import { jinjaChatModel, templateBackend, type TemplateBackend } from "../../testing/template-backend.js";
import { createGateway, type Gateway } from "../server.js";

const model = jinjaChatModel("qwen3-like", QWEN3_LIKE_TEMPLATE, CHATML_CONTROL, QWEN_ADDED, ["<|im_end|>"]);
let backend: TemplateBackend;
let gateway: Gateway;
let url: string;

const history: ChatMessage[] = [{ role: "user", content: "2+2?" }];
const turn = { content: "It is 4.", reasoning: "Two and two." };
// Qwen3's template writes the reasoning between newlines; the parser keeps them, as vLLM's does.
const reasoning = "\nTwo and two.\n";

beforeAll(async () => {
  backend = templateBackend({ name: "qwen", model, reasoningParser: reasoningParserNamed("think", "test") });
  gateway = createGateway({ backends: [backend], sink: { recordCall: async () => undefined } });
  url = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
});

function client(programId: string): OpenAI {
  return new OpenAI({ baseURL: `${url}/p/${programId}/v1`, apiKey: "unused", maxRetries: 0 });
}

describe("openai client: Responses reasoning on the token path of a think model", () => {
  it("responses.stream: reasoning_text deltas, then the message; the final response holds both, as the plain one does", async () => {
    backend.script({ history, turn });
    const plain = await client("rs-plain").responses.create({ model: "qwen", input: "2+2?" });
    expect(plain.output.map((o) => o.type)).toEqual(["reasoning", "message"]);

    backend.script({ history, turn });
    const stream = client("rs-stream").responses.stream({ model: "qwen", input: "2+2?" });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    stream.on("event", (e) => void events.push(e));
    const final = await stream.finalResponse();
    const deltas = events.filter((e) => e.type === "response.reasoning_text.delta");
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.map((e) => e.delta).join("")).toBe(reasoning);
    expect(deltas.every((e) => e.output_index === 0 && e.content_index === 0)).toBe(true);
    const types = events.map((e) => e.type);
    // The reasoning item is done before the message item is added.
    expect(types.indexOf("response.reasoning_text.done")).toBeLessThan(types.lastIndexOf("response.output_item.added"));
    expect(events.find((e) => e.type === "response.output_text.delta")).toMatchObject({ output_index: 1 });
    expect(final.output.map((o) => o.type)).toEqual(["reasoning", "message"]);
    expect(final.output[0]).toMatchObject({ type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: reasoning }], status: "completed" });
    expect(final.output[1]).toMatchObject({ type: "message", content: [{ type: "output_text", text: plain.output_text }] });
    // The SDK adds `parsed` to streamed text parts; the rest is the plain answer's output.
    expect(final.output.map((o) => ({ ...o, id: "" }))).toMatchObject(plain.output.map((o) => ({ ...o, id: "" })));
  });

  it("responses.create({stream: true}): the raw events carry the reasoning item", async () => {
    backend.script({ history, turn });
    const stream = await client("rs-raw").responses.create({ model: "qwen", input: "2+2?", stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const e of stream) events.push(e);
    const added = events.filter((e) => e.type === "response.output_item.added");
    expect(added.map((e) => e.item.type)).toEqual(["reasoning", "message"]);
    expect(events.find((e) => e.type === "response.reasoning_text.done")).toMatchObject({ output_index: 0, text: reasoning });
    const done = events.at(-1);
    expect(done?.type).toBe("response.completed");
    expect(done?.type === "response.completed" && done.response.output.map((o) => o.type)).toEqual(["reasoning", "message"]);
  });

  it("counts the reasoning's tokens in usage, plain and streamed: those between <think> and </think>", async () => {
    // The test tokenizer has one id per character and `<think>`, `</think>` as added tokens.
    const ids = model.render([...history, { role: "assistant", content: turn.content, reasoning: turn.reasoning }], false);
    expect(model.decode(ids)).toContain(`<think>${reasoning}</think>`);
    backend.script({ history, turn });
    const plain = await client("rs-usage").responses.create({ model: "qwen", input: "2+2?" });
    expect(plain.usage?.output_tokens_details.reasoning_tokens).toBe([...reasoning].length);
    expect(plain.usage?.output_tokens).toBeGreaterThan([...reasoning].length + 2);

    backend.script({ history, turn });
    const streamed = await client("rs-usage-s").responses.stream({ model: "qwen", input: "2+2?" }).finalResponse();
    expect(streamed.usage).toEqual(plain.usage);

    // The chat surface reports the same count, as OpenAI's completion_tokens_details.
    backend.script({ history, turn });
    const chat = await client("rs-usage-c").chat.completions.create({ model: "qwen", messages: [{ role: "user", content: "2+2?" }] });
    expect(chat.usage?.completion_tokens_details?.reasoning_tokens).toBe([...reasoning].length);
  });
});
