// The engine's explicit request limits (issue 13, servers 3 and 5): oversized and deeply nested
// requests are refused naming the field instead of overflowing the stack, stalled requests get 408.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArborError } from "../../core/errors.js";
import { BackendUnreachableError } from "../../backends/backend.js";
import { createEngineHttp } from "../../backends/engine-http.js";
import { rawExchange, rawJson } from "../../testing/hardening-fixture.js";
import { ScriptedExecutor } from "../../testing/scripted-executor.js";
import { startEngineServer, type ListeningEngineServer } from "../server.js";

let engine: ListeningEngineServer;

beforeAll(async () => {
  engine = await startEngineServer({
    name: "limits",
    modelPath: "scripted",
    policyVersion: 0,
    sequences: 2,
    contextSize: 4096,
    maxWaiting: 4,
    executor: new ScriptedExecutor(() => "ok", 4096),
    httpLimits: { requestTimeoutMs: 400, headersTimeoutMs: 200 },
  });
});
afterAll(async () => {
  await engine.close();
});

async function post(path: string, payload: unknown, headers: Record<string, string> = {}) {
  const res = await engine.app.inject({
    method: "POST",
    url: path,
    payload: typeof payload === "string" ? payload : JSON.stringify(payload),
    headers: { "content-type": "application/json", ...headers },
  });
  return { status: res.statusCode, error: (res.json() as { error: { message: string; type: string; param: string | null; code: string | null } }).error };
}

const user = (content: string) => [{ role: "user", content }];

describe("engine request limits", () => {
  it("refuses a 10 MB message as over the context, naming the message (not 'Maximum call stack size exceeded')", async () => {
    const r = await post("/v1/chat/completions", { messages: user("a".repeat(10_000_000)) });
    expect(r.status).toBe(400);
    expect(r.error).toMatchObject({ param: "messages[0].content", code: "context_length_exceeded", type: "invalid_request_error" });
    expect(r.error.message).toBe("messages[0].content: has at least 10000000 tokens, over the context of 4096 tokens (max_model_len)");
    const sum = await post("/v1/chat/completions", { messages: [...user("a".repeat(3000)), ...user("b".repeat(3000))] });
    expect(sum.error).toMatchObject({ param: "messages", code: "context_length_exceeded" });
    const tok = await post("/tokenize", { messages: user("a".repeat(10_000_000)) });
    expect(tok.error).toMatchObject({ param: "messages[0].content", code: "context_length_exceeded" });
    const text = await post("/v1/completions", { prompt: "a".repeat(10_000_000) });
    expect(text.error).toMatchObject({ param: "prompt", code: "context_length_exceeded" });
  });

  it("counts a tool-call marker in an assistant message as one token", async () => {
    const call = "<|tool_call|>f {}<|/tool_call|>";
    const r = await post("/v1/chat/completions", { messages: [...user("x"), { role: "assistant", content: call.repeat(150) }, ...user("y")], max_tokens: 2 });
    // 150 × 31 characters is over 4096, but 150 × 6 tokens is not.
    expect(r.status).toBe(200);
  });

  it("refuses 5,000 tools, and tools whose text cannot fit, naming `tools`", async () => {
    const tools = (n: number, description = "") => Array.from({ length: n }, (_, i) => ({ type: "function", function: { name: `t${i}`, description } }));
    const many = await post("/v1/chat/completions", { messages: user("x"), tools: tools(5000) });
    expect(many).toMatchObject({ status: 400, error: { param: "tools", message: "tools: 5000 tools given; at most 128 are supported (OpenAI's limit)" } });
    const long = await post("/v1/chat/completions", { messages: user("x"), tools: tools(100, "d".repeat(100)) });
    expect(long).toMatchObject({ status: 400, error: { param: "tools", code: "context_length_exceeded" } });
  });

  it("refuses a body nested deeper than 64 levels, naming where", async () => {
    const deep = `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"a":${"[".repeat(50_000)}${"]".repeat(50_000)}}}}]}`;
    const r = await post("/v1/chat/completions", deep);
    expect(r.status).toBe(400);
    expect(r.error.param).toMatch(/^tools\[0\]\.function\.parameters\.a\[0\]\[0\]/);
    expect(r.error.message).toContain("nested more than 64 levels deep");
  });

  it("answers 408 to a stalled body and an unknown route with OpenAI's invalid_request_error", async () => {
    const host = new URL(engine.url).host;
    const stalled = await rawExchange(engine.url, `POST /v1/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`, 5000);
    expect(stalled.closedByServer).toBe(true);
    expect(stalled.response).toMatch(/^HTTP\/1\.1 408 /);
    expect(rawJson(stalled.response)).toMatchObject({ error: { type: "invalid_request_error", code: "request_timeout" } });
    const missing = await engine.app.inject({ method: "GET", url: "/nope" });
    expect(missing.json()).toMatchObject({ error: { type: "invalid_request_error", code: "not_found" } });
  });

  it("refuses a non-ASCII program header, naming it as sent", async () => {
    const r = await rawExchange(
      engine.url,
      [
        "POST /v1/completions HTTP/1.1",
        `Host: ${new URL(engine.url).host}`,
        "Content-Type: application/json",
        "Content-Length: 14",
        "Connection: close",
        `x-arbor-program: ${Buffer.from("prögram", "utf8").toString("latin1")}`,
        "",
        '{"prompt":"x"}',
      ].join("\r\n"),
      3000,
    );
    expect(rawJson(r.response)).toMatchObject({ error: { param: "x-arbor-program", message: expect.stringContaining("got 'prögram', which is not printable ASCII") } });
  });
});

describe("engine HTTP client", () => {
  it("refuses a body JSON.stringify cannot serialize as the client's error, not an unreachable backend", async () => {
    const http = createEngineHttp({ name: "e", url: engine.url, root: engine.url });
    let deep: unknown = [];
    for (let i = 0; i < 50_000; i++) deep = [deep];
    const err = await http.postJson("/tokenize", { prompt: deep }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ArborError);
    expect(err).not.toBeInstanceOf(BackendUnreachableError);
    expect((err as ArborError).code).toBe("invalid_request");
  });
});
