// Regression tests of the gateway's hardening (issue 13, servers): hostile or malformed requests are
// refused as the client's fault before routing, hold no program slot, no socket for long, and get
// errors in the surface's own shape.
import { afterEach, describe, expect, it } from "vitest";
import type { Backend } from "../backends/backend.js";
import { allBackendsUp, rawExchange, rawJson, startHardeningSetup, type HardeningSetup } from "../testing/hardening-fixture.js";
import { createGateway } from "./server.js";

const open: HardeningSetup[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function setup(...args: Parameters<typeof startHardeningSetup>): Promise<HardeningSetup> {
  const s = await startHardeningSetup(...args);
  open.push(s);
  return s;
}

async function post(url: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: JSON.parse(text) as Record<string, unknown> & { error: { message: string; type: string; param: string | null; code: string | null } } };
}

const ask = (content = "hi") => ({ model: "m", messages: [{ role: "user", content }], max_tokens: 4 });

/** A chat body (as text: JSON.stringify itself would overflow) whose one tool's parameters nest `depth` arrays. */
function deepToolBody(depth: number): string {
  return `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","a":${"[".repeat(depth)}${"]".repeat(depth)}}}}]}`;
}

describe("gateway hardening", () => {
  it("refuses (400) a body nested 50,000 deep before routing: the backend stays up and other programs' calls succeed", async () => {
    const s = await setup();
    const [bad, good] = await Promise.all([post(s.url, "/p/evil/v1/chat/completions", deepToolBody(50_000)), post(s.url, "/p/other/v1/chat/completions", ask())]);
    expect(bad.status).toBe(400);
    expect(bad.json.error.type).toBe("invalid_request_error");
    expect(bad.json.error.param).toMatch(/^tools\[0\]\.function\.parameters\.a\[0\]\[0\]/);
    expect(bad.json.error.message).toContain("nested more than 64 levels deep");
    expect(good.status).toBe(200);
    expect(allBackendsUp(s.gw)).toBe(true);
    expect(s.calls.map((c) => c.programId)).toEqual(["other"]);
    expect(s.gw.table.get("evil")).toBeUndefined();
  });

  it("refuses more than 128 tools, naming the field", async () => {
    const s = await setup();
    const tools = Array.from({ length: 129 }, (_, i) => ({ type: "function", function: { name: `t${i}` } }));
    const r = await post(s.url, "/p/p/v1/chat/completions", { ...ask(), tools });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ param: "tools", message: "tools: 129 tools given; at most 128 are supported (OpenAI's limit)" });
  });

  it("does not fill the program table with programs whose only request was refused", async () => {
    const s = await setup({ maxPrograms: 4 });
    // Each id is fresh and each request fails after admission: the engine refuses the prompt as too long.
    for (let i = 0; i < 12; i++) {
      const r = await post(s.url, `/p/fresh-${i}/v1/chat/completions`, ask("x".repeat(600)));
      expect(r.status).toBe(400);
      expect(r.json.error.code).toBe("context_length_exceeded");
    }
    expect(s.gw.table.size).toBe(0);
    expect((await post(s.url, "/programs", { id: "new-one" })).status).toBe(201);
    expect((await post(s.url, "/p/new-two/v1/chat/completions", ask())).status).toBe(200);
    // A program created up front keeps its slot though its first call fails.
    expect((await post(s.url, "/p/new-one/v1/chat/completions", ask("x".repeat(600)))).status).toBe(400);
    expect(s.gw.table.get("new-one")?.state).toBe("active");
    expect(s.calls).toHaveLength(1);
  });

  it("answers 408 to a request whose body stalls, and to headers that never end", async () => {
    const s = await setup({ httpLimits: { requestTimeoutMs: 400, headersTimeoutMs: 200 } });
    const host = new URL(s.url).host;
    const stalledBody = await rawExchange(
      s.url,
      `POST /p/slow/v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model":`,
      5000,
    );
    expect(stalledBody.closedByServer).toBe(true);
    expect(stalledBody.response).toMatch(/^HTTP\/1\.1 408 /);
    expect(rawJson(stalledBody.response)).toMatchObject({ error: { type: "invalid_request_error", code: "request_timeout", message: expect.stringContaining("within 400 ms") } });
    expect(stalledBody.ms).toBeLessThan(3000);
    const stalledHeaders = await rawExchange(s.url, `POST /p/slow/v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\nX-Partial: `, 5000);
    expect(stalledHeaders.closedByServer).toBe(true);
    expect(stalledHeaders.response).toMatch(/^HTTP\/1\.1 408 /);
    expect(s.gw.table.size).toBe(0);
  });

  it("bounds the number of open connections", async () => {
    const s = await setup({ httpLimits: { maxConnections: 2 } });
    const host = new URL(s.url).host;
    const idle = `GET /health HTTP/1.1\r\nHost: ${host}\r\n\r\n`;
    // Two keep-alive connections stay open; the third is closed at once without an answer.
    const held = [rawExchange(s.url, idle, 800), rawExchange(s.url, idle, 800)];
    await new Promise((r) => setTimeout(r, 200));
    const third = await rawExchange(s.url, idle, 800);
    expect(third.closedByServer).toBe(true);
    expect(third.response).toBe("");
    for (const h of await Promise.all(held)) expect(h.response).toMatch(/^HTTP\/1\.1 200 /);
  });

  it("says when to retry on every capacity 429 (the per-program concurrency limit included)", async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const slow: Backend = {
      name: "slow",
      url: "http://slow/v1",
      chatCompletions: async () => {
        await gate;
        return { status: 500, json: { error: { message: "done" } } };
      },
      completions: async () => ({ status: 500, json: {} }),
      models: async () => ({}),
      health: async () => undefined,
    };
    const gw = createGateway({ backends: [slow], sink: { recordCall: async () => {} }, limits: { maxInFlightPerProgram: 1 } });
    try {
      const first = gw.app.inject({ method: "POST", url: "/p/busy/v1/chat/completions", payload: ask() });
      await new Promise((r) => setImmediate(r));
      const second = await gw.app.inject({ method: "POST", url: "/p/busy/v1/chat/completions", payload: ask() });
      expect(second.statusCode).toBe(429);
      expect(second.headers["retry-after"]).toBe("1");
      expect(second.json().error).toMatchObject({ type: "requests", code: "rate_limit_exceeded" });
      release();
      await first;
    } finally {
      await gw.close();
    }
  });

  it("serves path ids of up to 256 characters (not 414) and names the limit beyond", async () => {
    const s = await setup();
    const id = "p".repeat(256);
    expect((await post(s.url, `/p/${id}/v1/chat/completions`, ask())).status).toBe(200);
    const long = await post(s.url, `/p/${"q".repeat(257)}/v1/chat/completions`, ask());
    expect(long.status).toBe(400);
    expect(long.json.error.message).toContain("program id: must be 1-256 printable ASCII characters");
  });

  it("refuses a non-ASCII program header, naming it as sent", async () => {
    const s = await setup();
    const res = await rawExchange(
      s.url,
      [
        "POST /v1/chat/completions HTTP/1.1",
        `Host: ${new URL(s.url).host}`,
        "Content-Type: application/json",
        `Content-Length: ${JSON.stringify(ask()).length}`,
        "Connection: close",
        `x-arbor-program: ${Buffer.from("prögram-é", "utf8").toString("latin1")}`,
        "",
        JSON.stringify(ask()),
      ].join("\r\n"),
      3000,
    );
    expect(res.response).toMatch(/^HTTP\/1\.1 400 /);
    expect(rawJson(res.response)).toMatchObject({
      error: { param: "x-arbor-program", type: "invalid_request_error", message: "x-arbor-program: program ids are 1-256 printable ASCII characters; got 'prögram-é', which is not printable ASCII" },
    });
  });

  it("uses OpenAI's error types on OpenAI routes and Anthropic's shape on /v1/messages", async () => {
    const s = await setup();
    const malformed = await post(s.url, "/p/a/v1/chat/completions", "{");
    expect(malformed.status).toBe(400);
    expect(malformed.json.error.type).toBe("invalid_request_error");
    const missing = await post(s.url, "/v1/chat/completions", ask());
    expect(missing.json.error).toMatchObject({ type: "invalid_request_error", param: "program_id", code: "invalid_request" });
    const notFound = await post(s.url, "/v2/nothing", {});
    expect(notFound).toMatchObject({ status: 404, json: { error: { type: "invalid_request_error", code: "not_found" } } });

    const anthropic = { model: "m", max_tokens: 4, messages: [{ role: "user", content: "hi" }] };
    const badJson = await post(s.url, "/p/a/v1/messages", "{");
    expect(badJson.status).toBe(400);
    expect(badJson.json).toEqual({ type: "error", error: { type: "invalid_request_error", message: expect.stringContaining("request body:") } });
    const deep = await post(s.url, "/p/a/v1/messages", `{"model":"m","max_tokens":4,"messages":${"[".repeat(100)}${"]".repeat(100)}}`);
    expect(deep.json).toMatchObject({ type: "error", error: { type: "invalid_request_error", message: expect.stringContaining("nested more than 64 levels") } });
    const noProgram = await post(s.url, "/v1/messages", anthropic);
    expect(noProgram).toMatchObject({ status: 400, json: { type: "error", error: { type: "invalid_request_error" } } });
    // The engine's own refusal, relayed: still Anthropic's shape.
    const tooLong = await post(s.url, "/p/a/v1/messages", { ...anthropic, messages: [{ role: "user", content: "x".repeat(600) }] });
    expect(tooLong.status).toBe(400);
    expect(tooLong.json).toMatchObject({ type: "error", error: { type: "invalid_request_error", message: expect.stringContaining("context") } });
    expect(s.calls).toHaveLength(0);
  });
});

describe("gateway with auth", () => {
  const ADMIN = "admin-token-0123456789";

  it("refuses an anonymous inference call that names its program only in the body before reading that body", async () => {
    const s = await setup({ auth: { adminToken: ADMIN, requireProgramKeys: false } });
    const host = new URL(s.url).host;
    // 10 MB announced, 9 bytes sent: the 401 comes at once (a server reading the body first would wait).
    const r = await rawExchange(s.url, `POST /v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n{"model":`, 2500);
    expect(r.response).toMatch(/^HTTP\/1\.1 401 /);
    expect(rawJson(r.response)).toMatchObject({ error: { code: "invalid_api_key", message: expect.stringContaining("name the program in the path") } });
    expect(r.firstByteMs).toBeLessThan(2000);
    // Named in the path, an unkeyed program stays open to anonymous callers.
    expect((await post(s.url, "/p/open-one/v1/chat/completions", ask())).status).toBe(200);
    // On /v1/messages the same refusal comes in Anthropic's shape.
    const m = await post(s.url, "/v1/messages", { model: "m", max_tokens: 4, messages: [{ role: "user", content: "hi" }] });
    expect(m).toMatchObject({ status: 401, json: { type: "error", error: { type: "authentication_error" } } });
  });
});
