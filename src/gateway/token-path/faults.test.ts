// Fault handling on the token path with a real engine behind two backends (each reached through a
// proxy that can make it die mid-call): one retry elsewhere with the same prompt ids, one record.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createArborBackend } from "../../backends/vllm.js";
import { VirtualClock } from "../../core/clock.js";
import { createLogger } from "../../core/logger.js";
import type { Call } from "../../core/types.js";
import { startEngineServer, type ListeningEngineServer } from "../../engine/server.js";
import { ensurePolicy } from "../../model/policy.js";
import { createGateway, type Gateway, type GatewayOptions } from "../server.js";
import { startFaultProxy, type FaultProxy } from "../../testing/fault-proxy.js";

let dir: string;
let engine: ListeningEngineServer;
const open: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-faults-"));
  const policy = ensurePolicy(dir, { seed: 9, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 1024 });
  engine = await startEngineServer({ name: "e0", modelPath: policy.path, policyVersion: 2, sequences: 2, contextSize: 1024, maxWaiting: 8 });
});

afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

afterAll(async () => {
  await engine?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Setup {
  a: FaultProxy;
  b: FaultProxy;
  gw: Gateway;
  url: string;
  calls: Call[];
}

/** Backends 'a' and 'b', each a proxy in front of the one real engine; ties route to 'a' first. */
async function setup(extra: Partial<GatewayOptions> = {}): Promise<Setup> {
  const a = await startFaultProxy(engine.url);
  const b = await startFaultProxy(engine.url);
  const calls: Call[] = [];
  const gw = createGateway({
    backends: [createArborBackend({ name: "a", url: `${a.root}/v1` }), createArborBackend({ name: "b", url: `${b.root}/v1` })],
    sink: { recordCall: async (c) => void calls.push(c) },
    ...extra,
  });
  const url = await gw.listen("127.0.0.1", 0);
  open.push(a, b, gw);
  return { a, b, gw, url, calls };
}

async function chat(url: string, programId: string): Promise<{ status: number; json: { error?: { message: string; code: string } } }> {
  const res = await fetch(`${url}/p/${programId}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "arbor-tiny", messages: [{ role: "user", content: "What is 2+3?" }], max_tokens: 8, temperature: 1, seed: 1 }),
  });
  return { status: res.status, json: (await res.json()) as never };
}

const promptsSent = (p: FaultProxy): number[][] => p.seen.filter((r) => r.path === "/v1/completions").map((r) => JSON.parse(r.body).prompt);

async function metric(url: string, line: string): Promise<boolean> {
  return (await (await fetch(`${url}/metrics`)).text()).split("\n").includes(line);
}

describe("token path faults", () => {
  it("retries a call whose backend dies mid-call once on the other, with the same prompt ids, and records it once", async () => {
    const logged: string[] = [];
    const s = await setup({ logger: createLogger({ destination: { write: (l: string) => logged.push(l.trim()) } }) });
    s.a.set("/v1/completions", "reset");
    const r = await chat(s.url, "f1");
    expect(r.status).toBe(200);
    expect(s.calls).toHaveLength(1);
    expect(s.calls[0]!.backend).toBe("b");
    expect(promptsSent(s.a)).toEqual([s.calls[0]!.promptTokenIds]);
    expect(promptsSent(s.b)).toEqual([s.calls[0]!.promptTokenIds]);
    // 'a' is out of rotation until a health check passes; the retry is counted.
    expect(s.gw.health.tracker.isUp("a")).toBe(false);
    expect(await metric(s.url, 'arbor_gateway_backend_up{backend="a"} 0')).toBe(true);
    expect(await metric(s.url, 'arbor_gateway_retries_total{backend="a"} 1')).toBe(true);
    // The next call of the program goes to 'b' directly and continues from the recorded ids.
    expect((await chat(s.url, "f1")).status).toBe(200);
    expect(s.calls.map((c) => [c.backend, c.index])).toEqual([
      ["b", 0],
      ["b", 1],
    ]);
    // The gateway's log says when 'a' left the rotation and why, and when a health check brought it back.
    expect(logged).toContainEqual(expect.stringMatching(/^backend a out of rotation: .+/));
    for (let i = 0; i < 100 && !s.gw.health.tracker.isUp("a"); i++) await new Promise((r) => setTimeout(r, 50));
    expect(logged).toContain("backend a back in rotation (a health check passed)");
  });

  it("retries on a 5xx answer too", async () => {
    const s = await setup();
    s.a.set("/v1/completions", "error500");
    expect((await chat(s.url, "f2")).status).toBe(200);
    expect(s.calls.map((c) => c.backend)).toEqual(["b"]);
  });

  it("fails with a 502 naming both backends and their causes when both die, recording nothing", async () => {
    const s = await setup();
    s.a.set("/v1/completions", "reset");
    s.b.set("/v1/completions", "error500");
    const r = await chat(s.url, "f3");
    expect(r.status).toBe(502);
    expect(r.json.error?.code).toBe("backend_failed");
    expect(r.json.error?.message).toMatch(/backend 'a' failed: .*not reachable.*; backend 'b' failed: .*HTTP 500/);
    expect(s.calls).toEqual([]);
    // The failed call used no call index: the program's next call is still number 0.
    s.b.set("/v1/completions", "forward");
    expect((await chat(s.url, "f3")).status).toBe(200);
    expect(s.calls.map((c) => [c.backend, c.index])).toEqual([["b", 0]]);
  });

  it("a backend failing its health check mid-call: the call moves to the other, and the late answer is never recorded", async () => {
    const clock = new VirtualClock(0);
    const s = await setup({ clock, health: { intervalMs: 1000, recheckMs: 500 } });
    s.a.set("/v1/completions", "hold");
    const pending = chat(s.url, "f4");
    await s.a.held("/v1/completions");
    s.a.set("/v1/models", "error500");
    clock.advance(1000);
    const r = await pending;
    expect(r.status).toBe(200);
    expect(s.calls.map((c) => c.backend)).toEqual(["b"]);
    // The first attempt's engine answer arrives now: it is dropped, the call stays recorded once.
    await s.a.releaseHeld();
    expect(s.calls).toHaveLength(1);
    // 'a' comes back into rotation when its health check passes again.
    s.a.set("/v1/models", "forward");
    clock.advance(500);
    await s.gw.health.runDue();
    await vitestSettle(() => s.gw.health.tracker.isUp("a"));
    expect(await metric(s.url, 'arbor_gateway_backend_up{backend="a"} 1')).toBe(true);
  });

  it("a client leaving mid-call ends the engine request, records nothing and gives the route back", async () => {
    const s = await setup();
    s.a.set("/v1/completions", "hold");
    const ac = new AbortController();
    const pending = fetch(`${s.url}/p/f6/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "arbor-tiny", messages: [{ role: "user", content: "x" }], max_tokens: 8 }),
      signal: ac.signal,
    });
    await s.a.held("/v1/completions");
    ac.abort();
    await expect(pending).rejects.toThrow();
    // The gateway closes its request to the engine (not left generating for nobody) and ends the program's call.
    await vitestSettle(() => s.a.abandoned.length === 1);
    expect(s.a.abandoned).toEqual(["/v1/completions"]);
    await vitestSettle(() => s.gw.router.views().every((v) => v.inFlight === 0));
    expect(s.calls).toEqual([]);
    expect(s.b.seen.filter((r) => r.path === "/v1/completions")).toEqual([]);
  });

  it("a streamed call whose backend fails before the stream began is retried on the other and recorded once", async () => {
    const s = await setup();
    s.a.set("/v1/completions", "reset");
    const res = await fetch(`${s.url}/p/f6/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "arbor-tiny", messages: [{ role: "user", content: "What is 2+3?" }], max_tokens: 8, temperature: 1, seed: 1, stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const body = await res.text();
    expect(body.trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(s.calls.map((c) => c.backend)).toEqual(["b"]);
    expect(res.headers.get("x-arbor-call-id")).toBe(s.calls[0]!.id);
    // The same prompt ids went to both, streamed.
    expect(promptsSent(s.a)).toEqual([s.calls[0]!.promptTokenIds]);
    expect(promptsSent(s.b)).toEqual([s.calls[0]!.promptTokenIds]);
    expect(s.b.seen.filter((r) => r.path === "/v1/completions").map((r) => JSON.parse(r.body).stream)).toEqual([true]);
    // Both failing before the stream began: a 502 with a status, nothing recorded.
    s.b.set("/v1/completions", "error500");
    const both = await fetch(`${s.url}/p/f7/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "arbor-tiny", messages: [{ role: "user", content: "x" }], max_tokens: 8, stream: true }),
    });
    expect(both.status).toBe(503);
    expect(s.calls).toHaveLength(1);
  });

  it("with pausing, a program placed on a backend that leaves rotation continues on the other, and new programs go there too", async () => {
    const clock = new VirtualClock(0);
    const s = await setup({ clock, health: { intervalMs: 1000 }, pausing: { enabled: true, capacities: { a: 100_000, b: 100_000 } } });
    expect((await chat(s.url, "g1")).status).toBe(200);
    expect(s.calls.map((c) => c.backend)).toEqual(["a"]);
    s.a.set("/v1/models", "error500");
    clock.advance(1000);
    await vitestSettle(() => !s.gw.health.tracker.isUp("a"));
    // The pause gate hears of it with the router: g1's next call and a new program's first go to 'b'.
    expect((await chat(s.url, "g1")).status).toBe(200);
    expect((await chat(s.url, "g2")).status).toBe(200);
    expect(s.calls.map((c) => [c.programId, c.backend])).toEqual([
      ["g1", "a"],
      ["g1", "b"],
      ["g2", "b"],
    ]);
  });

  it("answers 503 naming each backend and why it is out of rotation when none is in", async () => {
    const clock = new VirtualClock(0);
    const s = await setup({ clock, health: { intervalMs: 1000 } });
    s.a.set("/v1/models", "error500");
    s.b.set("/v1/models", "reset");
    clock.advance(1000);
    await vitestSettle(() => !s.gw.health.tracker.isUp("a") && !s.gw.health.tracker.isUp("b"));
    const r = await chat(s.url, "f5");
    expect(r.status).toBe(503);
    expect(r.json.error?.message).toMatch(/'a' \(out of rotation: .*HTTP 500.*\), 'b' \(out of rotation: .*not reachable/);
    expect(s.calls).toEqual([]);
  });
});

/** Wait (on real I/O, bounded by the test timeout) until `ok()` holds. */
async function vitestSettle(ok: () => boolean): Promise<void> {
  while (!ok()) await new Promise((r) => setImmediate(r));
}
