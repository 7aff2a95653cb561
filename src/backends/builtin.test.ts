import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { BackendProtocolError, BackendUnreachableError } from "./backend.js";
import { createBuiltinBackend } from "./builtin.js";
import { startFakeVllm, type FakeVllm } from "./fake-vllm.js";
import { backendTypes, createBackend } from "./registry.js";
import { closedPort } from "../testing/closed-port.js";

let fake: FakeVllm;
// Answers HTML on every path; GET /never/v1/models never answers.
let odd: Server;
let oddUrl: string;

beforeAll(async () => {
  fake = await startFakeVllm({ policyVersion: 5 });
  odd = createServer((req, res) => {
    if (req.url?.startsWith("/never")) return;
    res.writeHead(req.url?.includes("chat") ? 503 : 200, { "content-type": "text/html" });
    res.end("<html>\n<b>oops</b></html>");
  });
  await new Promise<void>((r) => odd.listen(0, "127.0.0.1", r));
  oddUrl = `http://127.0.0.1:${(odd.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await fake.close();
  odd.closeAllConnections();
  await new Promise<void>((r) => odd.close(() => r()));
});

describe("builtin backend", () => {
  it("posts the body as given and returns the upstream JSON with its status", async () => {
    const b = createBuiltinBackend({ name: "e0", url: fake.url + "/" });
    expect(b.url).toBe(fake.url);
    const body = { model: "m", messages: [{ role: "user", content: "hi" }], return_token_ids: true, logprobs: true };
    const r = await b.chatCompletions(body);
    expect(r.status).toBe(200);
    expect(fake.requests.at(-1)).toEqual({ path: "/chat/completions", body });
    expect(r.json.policy_version).toBe(5);
    expect(r.json.choices[0].token_ids.length).toBeGreaterThan(0);
    const c = await b.completions({ model: "m", prompt: [1, 2, 3], return_token_ids: true, logprobs: 0 });
    expect(c.json.choices[0].prompt_token_ids).toEqual([1, 2, 3]);
  });

  it("returns upstream errors instead of throwing", async () => {
    const b = createBuiltinBackend({ name: "e0", url: fake.url });
    fake.failNext(429, "queue full");
    const r = await b.chatCompletions({ messages: [{ role: "user", content: "x" }] });
    expect(r.status).toBe(429);
    expect(r.json.error.message).toBe("queue full");
  });

  it("wraps a non-JSON error body in an OpenAI error and rejects a non-JSON success", async () => {
    const b = createBuiltinBackend({ name: "odd", url: oddUrl + "/v1" });
    const r = await b.chatCompletions({});
    expect(r.status).toBe(503);
    expect(r.json.error.message).toBe("backend 'odd' answered HTTP 503: <html> <b>oops</b></html>");
    const e = await b.completions({}).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(BackendProtocolError);
    expect((e as Error).message).toContain("answered /completions with non-JSON");
  });

  it("names backend, url and cause in one line when unreachable", async () => {
    const port = await closedPort();
    const b = createBuiltinBackend({ name: "engine-0", url: `http://127.0.0.1:${port}/v1` });
    const e = await b.chatCompletions({}).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(BackendUnreachableError);
    expect((e as ArborError).code).toBe("backend_unreachable");
    const h = await b.health().catch((x: unknown) => x);
    expect(h).toBeInstanceOf(ArborError);
    expect((h as Error).message).toMatch(
      new RegExp(`^backend 'engine-0' at http://127\\.0\\.0\\.1:${port}/v1 is not reachable: connect ECONNREFUSED[^\\n]*$`),
    );
    await expect(b.models()).rejects.toThrow(/ECONNREFUSED/);
  });

  it("rethrows the abort reason when the caller aborts", async () => {
    fake.hold();
    try {
      const b = createBuiltinBackend({ name: "e0", url: fake.url });
      const ac = new AbortController();
      const before = fake.requests.length;
      const p = b.chatCompletions({ messages: [{ role: "user", content: "x" }] }, ac.signal);
      await fake.waitForRequests(before + 1);
      const reason = new Error("caller gave up");
      ac.abort(reason);
      await expect(p).rejects.toBe(reason);
    } finally {
      fake.releaseHeld();
    }
  });

  it("health and models succeed against a live engine; probes time out on the clock", async () => {
    const b = createBuiltinBackend({ name: "e0", url: fake.url });
    await expect(b.health()).resolves.toBeUndefined();
    expect(await b.models()).toMatchObject({ object: "list", data: [{ id: "fake-model" }] });

    const clock = new VirtualClock();
    const slow = createBuiltinBackend({ name: "slow", url: oddUrl + "/never/v1", clock, probeTimeoutMs: 50 });
    const p = slow.health();
    clock.advance(50);
    await expect(p).rejects.toThrow(`backend 'slow' at ${oddUrl}/never/v1 is not reachable: no answer within 50 ms`);
  });

  it("reports an unhealthy (non-200) engine with its status", async () => {
    const b = createBuiltinBackend({ name: "e0", url: fake.url.replace(/\/v1$/, "/v2") });
    await expect(b.health()).rejects.toThrow(/^backend 'e0' at .*\/v2 is not healthy: HTTP 404/);
  });

  it("rejects bad urls and names", () => {
    expect(() => createBuiltinBackend({ name: "e0", url: "nope" })).toThrow("backend 'e0' url: not a valid URL: 'nope'");
    expect(() => createBuiltinBackend({ name: "e0", url: "ftp://x/v1" })).toThrow("must be http or https");
    expect(() => createBuiltinBackend({ name: "", url: fake.url })).toThrow("backend name: must not be empty");
  });
});

describe("backend registry", () => {
  it("creates builtin backends and names the known types for unknown ones", () => {
    expect(backendTypes).toEqual(["builtin", "vllm", "sglang", "llamacpp", "openai", "disagg"]);
    const b = createBackend({ name: "e1", type: "builtin", url: "http://127.0.0.1:9/v1" });
    expect([b.name, b.url]).toEqual(["e1", "http://127.0.0.1:9/v1"]);
    expect(createBackend({ name: "e2", type: "builtin" }, { url: "http://h:1/v1" }).url).toBe("http://h:1/v1");
    expect(() => createBackend({ name: "x", type: "tgi" as "builtin", url: "http://h/v1" })).toThrow(
      "backend 'x' type: unknown type 'tgi' (known: builtin, vllm, sglang, llamacpp, openai, disagg)",
    );
    expect(() => createBackend({ name: "x", type: "builtin" })).toThrow("backend 'x' url: missing");
  });
});
