// The gateway with auth and limits configured, driven by the official openai client (apiKey = program key).
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBuiltinBackend } from "../../backends/builtin.js";
import { startFakeVllm, type FakeVllm } from "../../backends/fake-vllm.js";
import { VirtualClock } from "../../core/clock.js";
import type { Call, TraceSink } from "../../core/types.js";
import { createGateway, type Gateway, type GatewayOptions } from "../server.js";

const ADMIN = "admin-token-0123456789abcdef";

class MemorySink implements TraceSink {
  calls: Call[] = [];
  async recordCall(call: Call): Promise<void> {
    this.calls.push(structuredClone(call));
  }
  callsOf(programId: string): Call[] {
    return this.calls.filter((c) => c.programId === programId);
  }
}

function client(baseURL: string, apiKey: string, headers: Record<string, string> = {}): OpenAI {
  return new OpenAI({ baseURL, apiKey, maxRetries: 0, defaultHeaders: headers });
}

async function failure(p: Promise<unknown>): Promise<{ status: number | undefined; code: string | null | undefined; type: string | undefined; headers: Headers | undefined }> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  if (!(e instanceof OpenAI.APIError)) throw new Error(`expected an APIError, got ${String(e)}`);
  return { status: e.status, code: e.code, type: e.type, headers: e.headers };
}

const ask = (c: OpenAI) => c.chat.completions.create({ model: "fake-model", messages: [{ role: "user", content: "hi" }], max_tokens: 2 });

interface Harness {
  fake: FakeVllm;
  gw: Gateway;
  url: string;
  sink: MemorySink;
  clock: VirtualClock;
  http(method: string, path: string, token?: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown>; headers: Headers }>;
  create(id: string): Promise<string>;
  close(): Promise<void>;
}

async function harness(extra: Partial<GatewayOptions>): Promise<Harness> {
  const fake = await startFakeVllm();
  const sink = new MemorySink();
  const clock = new VirtualClock(0);
  const gw = createGateway({ backends: [createBuiltinBackend({ name: "e0", url: fake.url })], sink, clock, callTimeoutMs: 5000, traceSource: sink, ...extra });
  const url = await gw.listen("127.0.0.1", 0);
  const http: Harness["http"] = async (method, path, token, body) => {
    const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, json: (await res.json()) as Record<string, unknown>, headers: res.headers };
  };
  return {
    fake,
    gw,
    url,
    sink,
    clock,
    http,
    async create(id) {
      const r = await http("POST", "/programs", ADMIN, { id });
      expect(r.status).toBe(201);
      expect(r.json.id).toBe(id);
      return r.json.api_key as string;
    },
    async close() {
      await gw.close();
      await fake.close();
    },
  };
}

describe("gateway with program keys required", () => {
  let h: Harness;
  let keyA: string;
  let keyB: string;
  beforeAll(async () => {
    h = await harness({ auth: { adminToken: ADMIN, requireProgramKeys: true }, bodyLimitBytes: 4096 });
    keyA = await h.create("prog-a");
    keyB = await h.create("prog-b");
  });
  afterAll(() => h.close());

  it("a program key works on its own program and gets 403 on another's inference and trace", async () => {
    const own = await ask(client(`${h.url}/p/prog-a/v1`, keyA));
    expect(own.choices[0]?.message.content).toBeTypeOf("string");
    expect(await ask(client(`${h.url}/v1`, keyA, { "x-arbor-program": "prog-a" }))).toBeTruthy();
    expect(h.sink.callsOf("prog-a")).toHaveLength(2);

    const other = await failure(ask(client(`${h.url}/p/prog-b/v1`, keyA)));
    expect(other).toMatchObject({ status: 403, code: "forbidden", type: "permission_error" });
    const viaHeader = await failure(ask(client(`${h.url}/v1`, keyA, { "x-arbor-program": "prog-b" })));
    expect(viaHeader.status).toBe(403);
    const viaBody = await failure(
      client(`${h.url}/v1`, keyA).chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }], program_id: "prog-b" } as never),
    );
    expect(viaBody.status).toBe(403);
    expect(h.sink.callsOf("prog-b")).toHaveLength(0);
    expect(h.fake.requests).toHaveLength(2);

    const trace = await h.http("GET", "/programs/prog-a/trace", keyA);
    expect(trace.status).toBe(200);
    expect((trace.json.calls as Call[]).map((c) => c.index)).toEqual([0, 1]);
    const foreign = await h.http("GET", "/programs/prog-b/trace", keyA);
    expect(foreign.status).toBe(403);
    expect(foreign.json).toMatchObject({ error: { type: "permission_error", code: "forbidden" } });
    expect((await h.http("GET", "/programs/prog-b", keyA)).status).toBe(403);
    expect((await h.http("GET", "/programs/prog-a", keyA)).json).toMatchObject({ id: "prog-a", calls: 2 });
    expect((await h.http("GET", "/programs/prog-b/trace", keyB)).json).toMatchObject({ program_id: "prog-b", calls: [] });
    expect((await h.http("GET", "/programs/prog-b/trace", ADMIN)).status).toBe(200);
  });

  it("a missing or garbage key is a 401 in OpenAI shape", async () => {
    const garbage = await failure(ask(client(`${h.url}/p/prog-a/v1`, "sk-garbage")));
    expect(garbage).toMatchObject({ status: 401, code: "invalid_api_key", type: "invalid_request_error" });
    const res = await fetch(`${h.url}/p/prog-a/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }] }),
    });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe("Bearer");
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_api_key");
    expect((await h.http("GET", "/programs/prog-a/trace")).status).toBe(401);
    expect((await h.http("GET", "/programs/prog-a/trace", "nope")).status).toBe(401);
    // An unknown program cannot be opened on first call without a key.
    expect((await failure(ask(client(`${h.url}/p/fresh/v1`, "x")))).status).toBe(401);
    expect(h.gw.table.get("fresh")).toBeUndefined();
    expect(await client(`${h.url}/v1`, keyA).models.list()).toBeTruthy();
    expect((await failure(client(`${h.url}/v1`, "bad").models.list())).status).toBe(401);
  });

  it("admin endpoints need the admin token: 401 without, 403 with a program key", async () => {
    expect((await h.http("GET", "/programs")).status).toBe(401);
    expect((await h.http("GET", "/programs", keyA)).status).toBe(403);
    expect((await h.http("POST", "/programs", keyA, { id: "x" })).status).toBe(403);
    expect((await h.http("POST", "/programs/prog-b/release", keyA)).status).toBe(403);
    expect((await h.http("POST", "/programs/prog-b/release")).status).toBe(401);
    expect((await h.http("GET", "/admin/anything", keyA)).status).toBe(403);
    expect((await h.http("GET", "/admin/anything")).status).toBe(401);
    expect((await h.http("GET", "/admin/anything", ADMIN)).status).toBe(404);
    expect((await h.http("GET", "/health")).status).toBe(200);
    expect(h.gw.table.get("prog-b")?.state).toBe("active");
  });

  it("shows a key once at creation and never in listings; duplicates are 409", async () => {
    const key = await h.create("prog-c");
    const list = await h.http("GET", "/programs", ADMIN);
    expect(list.status).toBe(200);
    expect((list.json.programs as { id: string }[]).map((p) => p.id)).toContain("prog-c");
    const everything = JSON.stringify([list.json, (await h.http("GET", "/programs/prog-c", ADMIN)).json]);
    for (const k of [key, keyA, keyB]) expect(everything).not.toContain(k);
    expect(everything).not.toContain("api_key");
    const dup = await h.http("POST", "/programs", ADMIN, { id: "prog-c" });
    expect(dup.status).toBe(409);
    expect(dup.json).toMatchObject({ error: { code: "program_exists" } });
    const generated = await h.http("POST", "/programs", ADMIN);
    expect(generated.status).toBe(201);
    expect(generated.json.id).toMatch(/^[0-9a-f-]{36}$/);
    expect((await h.http("POST", "/programs", ADMIN, { id: 7 })).status).toBe(400);
  });

  it("release needs the admin token; the released program's key still reads its trace but cannot call", async () => {
    const key = await h.create("prog-r");
    await ask(client(`${h.url}/p/prog-r/v1`, key));
    const rel = await h.http("POST", "/programs/prog-r/release", ADMIN);
    expect(rel.status).toBe(200);
    expect(rel.json.state).toBe("terminated");
    expect((await failure(ask(client(`${h.url}/p/prog-r/v1`, key)))).status).toBe(409);
    const trace = await h.http("GET", "/programs/prog-r/trace", key);
    expect(trace.status).toBe(200);
    expect(trace.json.calls).toHaveLength(1);
  });

  it("a body over the limit is a 413 in OpenAI shape (after the credential check)", async () => {
    const big = { model: "m", messages: [{ role: "user", content: "x".repeat(8000) }] };
    const tooLarge = await failure(client(`${h.url}/p/prog-a/v1`, keyA).chat.completions.create(big as never));
    expect(tooLarge).toMatchObject({ status: 413, code: "request_too_large" });
    expect((await failure(client(`${h.url}/p/prog-a/v1`, "bad").chat.completions.create(big as never))).status).toBe(401);
  });
});

describe("gateway limits", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness({ auth: { adminToken: ADMIN, requireProgramKeys: false }, limits: { maxInFlightPerProgram: 2, requestsPerSecond: 1, burst: 4 } });
  });
  afterAll(() => h.close());

  it("caps a program's calls in flight with 429 while its upstream calls are held", async () => {
    h.fake.hold();
    const c = client(`${h.url}/p/busy/v1`, "unused-in-open-mode-but-sent");
    const held = [ask(client(`${h.url}/p/busy/v1`, ADMIN)), ask(client(`${h.url}/p/busy/v1`, ADMIN))];
    await h.fake.waitForRequests(2);
    // An unknown credential is still a 401, even when keys are optional.
    expect((await failure(ask(c))).status).toBe(401);
    const third = await failure(ask(client(`${h.url}/p/busy/v1`, ADMIN)));
    expect(third).toMatchObject({ status: 429, code: "rate_limit_exceeded", type: "requests" });
    // Another program is not affected by busy's limit.
    const other = ask(client(`${h.url}/p/calm/v1`, ADMIN));
    await h.fake.waitForRequests(3);
    h.fake.releaseHeld();
    await Promise.all([...held, other]);
    expect(h.gw.table.get("busy")?.calls).toBe(2);
    expect(h.fake.requests).toHaveLength(3);
  });

  it("limits a program's request rate with retry-after, refilled by the clock", async () => {
    const open = new OpenAI({ baseURL: `${h.url}/p/steady/v1`, apiKey: "", maxRetries: 0, defaultHeaders: { authorization: null } });
    for (let i = 0; i < 4; i++) await ask(open);
    const limited = await failure(ask(open));
    expect(limited).toMatchObject({ status: 429, code: "rate_limit_exceeded" });
    expect(limited.headers?.get("retry-after")).toBe("1");
    h.clock.advance(1000);
    await ask(open);
    expect((await failure(ask(open))).status).toBe(429);
  });

  it("a keyed program still needs its key when keys are optional; unkeyed ones stay open", async () => {
    const key = await h.create("keyed");
    const open = new OpenAI({ baseURL: `${h.url}/p/keyed/v1`, apiKey: "", maxRetries: 0, defaultHeaders: { authorization: null } });
    expect((await failure(ask(open))).status).toBe(401);
    expect(await ask(client(`${h.url}/p/keyed/v1`, key))).toBeTruthy();
  });
});

describe("gateway without auth", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness({});
  });
  afterAll(() => h.close());

  it("stays open: any key, admin endpoints and traces without credentials", async () => {
    expect(await ask(client(`${h.url}/p/anyone/v1`, "whatever"))).toBeTruthy();
    expect((await h.http("GET", "/programs")).status).toBe(200);
    expect((await h.http("GET", "/programs/anyone/trace")).json.calls).toHaveLength(1);
    const created = await h.http("POST", "/programs", undefined, { id: "made" });
    expect(created.status).toBe(201);
    expect(created.json.api_key).toMatch(/^arbor-pk-/);
    expect(await ask(client(`${h.url}/p/made/v1`, "not-its-key"))).toBeTruthy();
    expect((await h.http("POST", "/programs/made/release")).status).toBe(200);
    expect((await h.http("GET", "/programs/nobody/trace")).status).toBe(404);
  });
});
