import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GatewayProxy } from "./gateway-proxy.js";
import { splitReport } from "./blackbox-runner.js";
import { LAUNCHER_MARK } from "./launcher-source.js";

let upstream: http.Server;
let gatewayUrl: string;
const seen: { method: string; url: string; auth: string | undefined; body: string }[] = [];
const dir = mkdtempSync(join(tmpdir(), "arbor-proxy-"));

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", auth: req.headers.authorization, body });
      if (req.url?.endsWith("/fail")) {
        res.writeHead(500).end("{}");
        return;
      }
      // The answer a test asks for: its content type and body, as JSON in a header.
      const asked = req.headers["x-test-answer"];
      if (typeof asked === "string") {
        const { type, body: answer, cut, hold } = JSON.parse(asked) as { type: string; body: string; cut?: boolean; hold?: boolean };
        res.writeHead(200, { "content-type": type });
        if (hold) {
          // A long answer: half of it, then nothing until the caller goes away.
          res.write(answer.slice(0, Math.floor(answer.length / 2)));
          return;
        }
        if (cut) {
          // The gateway fails mid-answer: half the stream, then the connection drops.
          res.write(answer.slice(0, Math.floor(answer.length / 2)), () => res.destroy());
          return;
        }
        // In two writes, split inside an event: the proxy reads usage across chunks.
        res.write(answer.slice(0, Math.floor(answer.length / 2)));
        res.end(answer.slice(Math.floor(answer.length / 2)));
        return;
      }
      // Two chunks: streamed answers pass through as they come.
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: 1\n\n");
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", () => r()));
  gatewayUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((r) => upstream.close(r));
  rmSync(dir, { recursive: true, force: true });
});

function request(socketPath: string, method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method, path, agent: false, headers: { authorization: "Bearer k", ...headers } }, (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("GatewayProxy", () => {
  it("binds a socket on a path longer than a socket address allows, and forwards only the program's routes", async () => {
    const deep = join(dir, "w".repeat(120), ".arbor");
    mkdirSync(deep, { recursive: true });
    const socketPath = join(deep, "gateway.sock");
    expect(socketPath.length).toBeGreaterThan(108);
    const proxy = new GatewayProxy({ socketPath, gatewayUrl, programId: "run/g0/s1", maxCalls: 2 });
    await proxy.start();
    // Clients cannot connect to so long a path either (the sandbox uses /workspace/.arbor/...): go through a directory fd.
    const fd = openSync(dirname(socketPath), "r");
    const clientPath = `/proc/self/fd/${fd}/${basename(socketPath)}`;
    const own = "/p/run%2Fg0%2Fs1/v1";
    expect(await request(clientPath, "POST", `${own}/chat/completions`, '{"a":1}')).toEqual({ status: 200, text: "data: 1\n\ndata: [DONE]\n\n" });
    expect(seen.at(-1)).toEqual({ method: "POST", url: `${own}/chat/completions`, auth: "Bearer k", body: '{"a":1}' });
    expect((await request(clientPath, "GET", `${own}/models`)).status).toBe(200);
    for (const path of ["/programs", "/p/other/v1/chat/completions", `${own}/../../programs`, "/v1/chat/completions", "/admin/pause"]) {
      const r = await request(clientPath, "POST", path, "{}");
      expect(r.status).toBe(403);
      expect(JSON.parse(r.text).error.code).toBe("forbidden_path");
    }
    expect((await request(clientPath, "POST", `${own}/messages`, "{}")).status).toBe(200);
    // The third model call is over the limit; reading models still works.
    const over = await request(clientPath, "POST", `${own}/chat/completions`, "{}");
    expect(over.status).toBe(429);
    expect(JSON.parse(over.text).error.message).toBe("program run/g0/s1 reached its limit of 2 model calls");
    expect(proxy.stats).toEqual({ forwarded: 3, refused: 6, callLimitHit: true, tokenLimitHit: false, generatedTokens: 0,
      // The test gateway's streams carry no usage: the two answered model calls are not counted, and say so.
      uncountedCalls: 2,
      lastUncountedReason: "stream carried no usage",
      lastStatus: 200,
      upstreamFailures: 0,
      clampedCalls: 0,
      cappedCalls: 0,
    });
    await proxy.close();
    closeSync(fd);
    expect(existsSync(socketPath)).toBe(false);
    await proxy.close();
  });

  it("answers 502 when the gateway is unreachable and counts 5xx answers as upstream failures", async () => {
    const socketPath = join(dir, "a.sock");
    const down = new GatewayProxy({ socketPath, gatewayUrl: "http://127.0.0.1:9", programId: "p" });
    await down.start();
    const r = await request(socketPath, "POST", "/p/p/v1/chat/completions", "{}");
    expect(r.status).toBe(502);
    expect(JSON.parse(r.text).error.message).toMatch(/^gateway unreachable: connect ECONNREFUSED/);
    expect(down.stats).toMatchObject({ lastStatus: 0, upstreamFailures: 1 });
    await down.close();

    const up = new GatewayProxy({ socketPath, gatewayUrl, programId: "p" });
    await up.start();
    expect((await request(socketPath, "POST", "/p/p/v1/fail", "{}")).status).toBe(500);
    expect(up.stats).toMatchObject({ lastStatus: 500, upstreamFailures: 1 });
    await up.close();
    expect(() => new GatewayProxy({ socketPath, gatewayUrl: "https://x", programId: "p" })).toThrow(/must be http/);
  });

  it("bounds every model call to maxTokensPerCall: lowers or adds the limit field, or refuses naming it", async () => {
    const socketPath = join(dir, "cap.sock");
    const proxy = new GatewayProxy({ socketPath, gatewayUrl, programId: "p", maxTokensPerCall: 16, maxCalls: 3, maxRequestBytes: 1024 });
    await proxy.start();
    const big = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 4096, stream: true });
    expect((await request(socketPath, "POST", "/p/p/v1/chat/completions", big)).status).toBe(200);
    expect(JSON.parse(seen.at(-1)!.body)).toEqual({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 16, stream: true });
    expect((await request(socketPath, "POST", "/p/p/v1/messages", '{"model":"m"}')).status).toBe(200);
    expect(JSON.parse(seen.at(-1)!.body)).toEqual({ model: "m", max_tokens: 16 });
    // Bodies that cannot be capped are refused, and do not use up a call.
    const notJson = await request(socketPath, "POST", "/p/p/v1/completions", "max_tokens=9");
    expect(notJson.status).toBe(400);
    expect(JSON.parse(notJson.text).error).toMatchObject({ code: "invalid_body", message: "request body must be a JSON object" });
    const huge = await request(socketPath, "POST", "/p/p/v1/completions", JSON.stringify({ prompt: "x".repeat(2000) }));
    expect(huge.status).toBe(413);
    expect((await request(socketPath, "POST", "/p/p/v1/responses", '{"max_output_tokens":8}')).status).toBe(200);
    expect(JSON.parse(seen.at(-1)!.body)).toEqual({ max_output_tokens: 8 });
    expect(proxy.stats).toMatchObject({ forwarded: 3, refused: 2, clampedCalls: 1, cappedCalls: 1, callLimitHit: false });
    await proxy.close();

    const strict = new GatewayProxy({ socketPath, gatewayUrl, programId: "p", maxTokensPerCall: 16, overCap: "refuse" });
    await strict.start();
    const r = await request(socketPath, "POST", "/p/p/v1/chat/completions", '{"max_completion_tokens":17}');
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text).error).toEqual({
      message: "max_completion_tokens: 17 is above this program's per-call limit of 16 tokens (agent.maxTokensPerCall)",
      type: "invalid_request_error",
      code: "max_tokens_above_limit",
      param: "max_completion_tokens",
    });
    expect(strict.stats).toMatchObject({ forwarded: 0, refused: 1 });
    await strict.close();
    expect(() => new GatewayProxy({ socketPath, gatewayUrl, programId: "p", maxTokensPerCall: 0 })).toThrow(/maxTokensPerCall must be an integer >= 1, got 0/);
  });

  it("counts the generated tokens of streamed and JSON answers toward maxTotalTokens, and the calls it cannot count", async () => {
    const socketPath = join(dir, "budget.sock");
    const proxy = new GatewayProxy({ socketPath, gatewayUrl, programId: "p", maxTotalTokens: 40 });
    await proxy.start();
    const answer = (type: string, body: string): Record<string, string> => ({ "x-test-answer": JSON.stringify({ type, body }) });
    const chat = [{ choices: [{ index: 0, delta: { content: "ok" }, finish_reason: "stop" }] }, { choices: [], usage: { prompt_tokens: 50, completion_tokens: 12 } }];
    const chatStream = chat.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n";
    expect((await request(socketPath, "POST", "/p/p/v1/chat/completions", "{}", answer("text/event-stream", chatStream))).status).toBe(200);
    expect(proxy.stats).toMatchObject({ generatedTokens: 12, uncountedCalls: 0 });
    const delta = { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 20 } };
    await request(socketPath, "POST", "/p/p/v1/messages", "{}", answer("text/event-stream", `event: message_delta\ndata: ${JSON.stringify(delta)}\n\n`));
    expect(proxy.stats.generatedTokens).toBe(32);
    // A stream without usage is not counted, and the proxy says so.
    await request(socketPath, "POST", "/p/p/v1/chat/completions", "{}", answer("text/event-stream", "data: {\"choices\":[]}\n\n"));
    expect(proxy.stats).toMatchObject({ generatedTokens: 32, uncountedCalls: 1, lastUncountedReason: "stream carried no usage" });
    // An answer cut off before its usage came is not counted either, and the agent sees the failure
    // (its connection is cut too) instead of waiting on a half-sent answer.
    const cut = await request(socketPath, "POST", "/p/p/v1/chat/completions", "{}", { "x-test-answer": JSON.stringify({ type: "text/event-stream", body: chatStream, cut: true }) }).catch((e: Error) => e);
    expect(cut).toBeInstanceOf(Error);
    await expect.poll(() => proxy.stats.uncountedCalls).toBe(2);
    expect(proxy.stats).toMatchObject({ generatedTokens: 32, lastUncountedReason: "answer ended before its end", upstreamFailures: 1 });
    // The agent hangs up mid-answer: not counted, and not the gateway's failure.
    await new Promise<void>((resolve, reject) => {
      const req = http.request({ socketPath, method: "POST", path: "/p/p/v1/chat/completions", agent: false, headers: { "x-test-answer": JSON.stringify({ type: "text/event-stream", body: chatStream, hold: true }) } }, (res) => {
        res.once("data", () => {
          res.on("error", () => resolve());
          res.on("close", () => resolve());
          req.destroy();
        });
      });
      req.on("error", reject);
      req.end("{}");
    });
    await expect.poll(() => proxy.stats.uncountedCalls).toBe(3);
    expect(proxy.stats).toMatchObject({ generatedTokens: 32, upstreamFailures: 1 });
    await request(socketPath, "POST", "/p/p/v1/responses", "{}", answer("application/json", JSON.stringify({ object: "response", usage: { output_tokens: 9 } })));
    expect(proxy.stats.generatedTokens).toBe(41);
    // Over the budget: the next call is refused before it reaches the gateway.
    const before = seen.length;
    const over = await request(socketPath, "POST", "/p/p/v1/chat/completions", "{}", answer("text/event-stream", chatStream));
    expect(over.status).toBe(429);
    expect(JSON.parse(over.text).error.code).toBe("token_limit");
    expect(seen.length).toBe(before);
    expect(proxy.stats).toMatchObject({ tokenLimitHit: true, forwarded: 6, refused: 1, upstreamFailures: 1 });
    await proxy.close();
  });

  it("reads the launcher's report from the end of stderr, leaving the command's own stderr", () => {
    expect(splitReport(`warn\n\n${LAUNCHER_MARK}{"code":3,"signal":null}\n`)).toEqual({ report: { code: 3, signal: null }, stderr: "warn\n" });
    expect(splitReport("no report")).toEqual({ stderr: "no report" });
  });
});
