// Gateway lifecycle features over a fake vLLM under a VirtualClock: idle-timeout release,
// termination hooks, and the Prometheus /metrics endpoint (with and without auth).
import OpenAI from "openai";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createBuiltinBackend } from "../backends/builtin.js";
import { startFakeVllm, type FakeVllm } from "../backends/fake-vllm.js";
import { VirtualClock } from "../core/clock.js";
import type { Call, TraceSink } from "../core/types.js";
import { createGateway, DEFAULT_IDLE_RELEASE_MS, type Gateway, type GatewayOptions } from "./server.js";

const ADMIN = "admin-token-0123456789abcdef";

class MemorySink implements TraceSink {
  calls: Call[] = [];
  async recordCall(call: Call): Promise<void> {
    this.calls.push(structuredClone(call));
  }
}

interface Harness {
  fake: FakeVllm;
  gw: Gateway;
  url: string;
  sink: MemorySink;
  clock: VirtualClock;
  ask(programId: string, text?: string, apiKey?: string): Promise<unknown>;
  http(method: string, path: string, token?: string, body?: unknown): Promise<{ status: number; text: string }>;
}

const open: Harness[] = [];

async function harness(extra: Partial<GatewayOptions>): Promise<Harness> {
  const fake = await startFakeVllm();
  const sink = new MemorySink();
  const clock = new VirtualClock(0);
  const gw = createGateway({ backends: [createBuiltinBackend({ name: "e0", url: fake.url })], sink, clock, callTimeoutMs: 5000, ...extra });
  const url = await gw.listen("127.0.0.1", 0);
  const h: Harness = {
    fake,
    gw,
    url,
    sink,
    clock,
    ask: (programId, text = "hi", apiKey = "x") =>
      new OpenAI({ baseURL: `${url}/p/${programId}/v1`, apiKey, maxRetries: 0 }).chat.completions.create({
        model: "fake-model",
        messages: [{ role: "user", content: text }],
        max_tokens: 3,
      }),
    async http(method, path, token, body) {
      const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
      if (body !== undefined) headers["content-type"] = "application/json";
      const res = await fetch(url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, text: await res.text() };
    },
  };
  open.push(h);
  return h;
}

afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.gw.close();
    await h.fake.close();
  }
  vi.restoreAllMocks();
});

/** The value of one sample line of the metrics text, or undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("gateway idle release and termination hooks", () => {
  it("releases idle programs after the timeout, not while a call is in flight, and fires each hook once", async () => {
    const fired: [string, string][] = [];
    const h = await harness({ idleReleaseMs: 1000, onProgramTerminated: (id, reason) => void fired.push([id, reason]) });
    await h.ask("idle-one");
    h.fake.hold();
    const pending = h.ask("busy-one");
    await h.fake.waitForRequests(2);
    h.clock.advance(999);
    expect(h.gw.table.get("idle-one")?.state).toBe("active");
    h.clock.advance(1);
    expect(h.gw.table.get("idle-one")?.state).toBe("terminated");
    expect(h.gw.table.get("busy-one")).toMatchObject({ state: "active", inFlight: 1 });
    expect(fired).toEqual([["idle-one", "idle"]]);

    h.fake.releaseHeld();
    await pending;
    h.clock.advance(999);
    expect(h.gw.table.get("busy-one")?.state).toBe("active");
    h.clock.advance(1);
    expect(h.gw.table.get("busy-one")?.state).toBe("terminated");
    expect(fired).toEqual([["idle-one", "idle"], ["busy-one", "idle"]]);

    // A released program's late call is refused; releasing it again fires nothing.
    const late = await h.ask("idle-one").then(() => undefined, (e: unknown) => e);
    expect((late as InstanceType<typeof OpenAI.APIError>).status).toBe(409);
    expect((await h.http("POST", "/programs/idle-one/release")).status).toBe(200);
    h.clock.advance(10_000);
    expect(fired).toHaveLength(2);
  });

  it("releases idle programs by default after ten minutes", async () => {
    const fired: [string, string][] = [];
    const h = await harness({ onProgramTerminated: (id, reason) => void fired.push([id, reason]) });
    await h.ask("p1");
    h.clock.advance(DEFAULT_IDLE_RELEASE_MS - 1);
    expect(h.gw.table.get("p1")?.state).toBe("active");
    h.clock.advance(1);
    expect(h.gw.table.get("p1")?.state).toBe("terminated");
    expect(fired).toEqual([["p1", "idle"]]);
  });

  it("fires 'released' once on explicit release and never idles with idleReleaseMs: 0", async () => {
    const fired: [string, string][] = [];
    const h = await harness({ idleReleaseMs: 0, onProgramTerminated: (id, reason) => void fired.push([id, reason]) });
    await h.ask("p1");
    h.clock.advance(1e9);
    expect(h.gw.table.get("p1")?.state).toBe("active");
    expect(h.clock.pendingTimers).toBe(0);
    expect((await h.http("POST", "/programs/p1/release")).status).toBe(200);
    expect((await h.http("POST", "/programs/p1/release")).status).toBe(200);
    expect(fired).toEqual([["p1", "released"]]);
  });

  it("logs a throwing or rejecting hook to stderr once and keeps serving", async () => {
    const writes: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      writes.push(String(chunk));
      return true;
    });
    let n = 0;
    const h = await harness({
      idleReleaseMs: 50,
      onProgramTerminated: (id) => {
        n++;
        if (id === "sync") throw new Error("sandbox gone");
        return Promise.reject(new Error("gc failed"));
      },
    });
    await h.ask("sync");
    expect((await h.http("POST", "/programs/sync/release")).status).toBe(200);
    await h.ask("async");
    h.clock.advance(50);
    await new Promise((r) => setImmediate(r));
    expect(n).toBe(2);
    expect(writes.filter((w) => w.includes("sandbox gone"))).toHaveLength(1);
    expect(writes.filter((w) => w.includes("gc failed"))).toHaveLength(1);
    vi.restoreAllMocks();
    await h.ask("after");
    expect(h.sink.calls.map((c) => c.programId)).toEqual(["sync", "async", "after"]);
  });

  it("stops its idle timer on close", async () => {
    const h = await harness({ idleReleaseMs: 100 });
    expect(h.clock.pendingTimers).toBe(1);
    await h.gw.close();
    expect(h.clock.pendingTimers).toBe(0);
    await h.fake.close();
    open.splice(open.indexOf(h), 1);
  });
});

describe("gateway /metrics", () => {
  it("counts requests, tokens, programs and releases in its own registry", async () => {
    const h = await harness({ idleReleaseMs: 1000 });
    await h.ask("m1", "hello");
    await h.ask("m1", "again");
    await h.ask("m2", "x");
    h.fake.failNext(500, "engine exploded");
    await h.ask("m2").catch(() => undefined);
    await new OpenAI({ baseURL: `${h.url}/p/m3/v1`, apiKey: "x", maxRetries: 0 }).completions.create({ model: "fake-model", prompt: "abc", max_tokens: 2 });
    expect((await h.http("POST", "/programs/m3/release")).status).toBe(200);
    h.clock.advance(1000); // m1, m2 idle out

    const res = await h.http("GET", "/metrics");
    expect(res.status).toBe(200);
    const t = res.text;
    expect(sample(t, 'arbor_gateway_requests_total{backend="e0",endpoint="chat",status="200"}')).toBe(3);
    expect(sample(t, 'arbor_gateway_requests_total{backend="e0",endpoint="chat",status="500"}')).toBe(1);
    expect(sample(t, 'arbor_gateway_requests_total{backend="e0",endpoint="completions",status="200"}')).toBe(1);
    expect(sample(t, 'arbor_gateway_request_duration_seconds_count{backend="e0",endpoint="chat"}')).toBe(4);
    expect(sample(t, 'arbor_gateway_inflight_requests{backend="e0"}')).toBe(0);
    const prompt = h.sink.calls.reduce((s, c) => s + c.promptTokenIds.length, 0);
    const output = h.sink.calls.reduce((s, c) => s + c.outputTokenIds.length, 0);
    expect(prompt).toBeGreaterThan(0);
    expect(sample(t, "arbor_gateway_prompt_tokens_total")).toBe(prompt);
    expect(sample(t, "arbor_gateway_output_tokens_total")).toBe(output);
    expect(sample(t, 'arbor_gateway_programs{state="active"}')).toBe(0);
    expect(sample(t, 'arbor_gateway_programs{state="terminated"}')).toBe(3);
    expect(sample(t, 'arbor_gateway_programs_released_total{reason="released"}')).toBe(1);
    expect(sample(t, 'arbor_gateway_programs_released_total{reason="idle"}')).toBe(2);
  });

  it("keeps each gateway's metrics apart", async () => {
    const a = await harness({});
    const b = await harness({});
    await a.ask("only-a");
    expect(sample((await b.http("GET", "/metrics")).text, "arbor_gateway_prompt_tokens_total")).toBe(0);
    expect(sample((await a.http("GET", "/metrics")).text, "arbor_gateway_prompt_tokens_total")).toBeGreaterThan(0);
  });

  it("needs the admin token when auth is configured", async () => {
    const h = await harness({ auth: { adminToken: ADMIN, requireProgramKeys: true } });
    const created = await h.http("POST", "/programs", ADMIN, { id: "k1" });
    const key = (JSON.parse(created.text) as { api_key: string }).api_key;
    await h.ask("k1", "hi", key);
    expect((await h.http("GET", "/metrics")).status).toBe(401);
    expect((await h.http("GET", "/metrics", key)).status).toBe(403);
    const ok = await h.http("GET", "/metrics", ADMIN);
    expect(ok.status).toBe(200);
    expect(sample(ok.text, 'arbor_gateway_requests_total{backend="e0",endpoint="chat",status="200"}')).toBe(1);
  });
});
