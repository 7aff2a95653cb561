// Tests of the bench's bare relay: bodies and answers pass through unchanged, and an unreachable upstream is a 502.
import Fastify from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { startHttpRelay, type HttpRelay } from "./http-relay.js";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

async function relayTo(root: string): Promise<HttpRelay> {
  const relay = await startHttpRelay(root);
  closers.push(() => relay.close());
  return relay;
}

describe("startHttpRelay", () => {
  it("forwards a POST's path and bytes and returns the upstream's status, type and bytes", async () => {
    const upstream = Fastify({ logger: false });
    upstream.removeAllContentTypeParsers();
    upstream.addContentTypeParser("*", { parseAs: "string" }, (_req, body, done) => done(null, body));
    upstream.post("/v1/echo", async (req, reply) => reply.code(201).header("content-type", "text/x-echo").send(`${req.headers["content-type"]}|${String(req.body)}`));
    const root = await upstream.listen({ host: "127.0.0.1", port: 0 });
    closers.push(() => upstream.close());
    const relay = await relayTo(root);
    // Key order and spacing kept: the relay does not parse the body.
    const body = '{"b": 1,  "a":[2, 3]}';
    const res = await fetch(`${relay.url}/v1/echo`, { method: "POST", headers: { "content-type": "application/json" }, body });
    expect(res.status).toBe(201);
    expect(res.headers.get("content-type")).toBe("text/x-echo");
    expect(await res.text()).toBe(`application/json|${body}`);
  });

  it("answers 502 naming the upstream it cannot reach", async () => {
    const dead = Fastify({ logger: false });
    const root = await dead.listen({ host: "127.0.0.1", port: 0 });
    await dead.close();
    const relay = await relayTo(root);
    const res = await fetch(`${relay.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain(`relay: upstream ${root} unreachable`);
  });
});
