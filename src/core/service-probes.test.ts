import Fastify from "fastify";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "./clock.js";
import { registerServiceProbes } from "./service-probes.js";

/** An app whose POST /work answers when the test releases it. */
function app(notReady: () => string | undefined = () => undefined) {
  const clock = new VirtualClock();
  const a = Fastify();
  const held: (() => void)[] = [];
  const probes = registerServiceProbes(a, { clock, notReady, refuseWhileDraining: (req) => (req.url === "/work" ? "no new work" : undefined) });
  a.post("/work", () => new Promise((resolve) => held.push(() => resolve({ ok: true }))));
  a.post("/other", async () => ({ ok: true }));
  return { a, clock, probes, held };
}

describe("registerServiceProbes", () => {
  it("healthz 200; readyz 200, or 503 with the reason the service gives", async () => {
    let why: string | undefined = "store closed";
    const { a } = app(() => why);
    expect((await a.inject("/healthz")).statusCode).toBe(200);
    const r = await a.inject("/readyz");
    expect(r.statusCode).toBe(503);
    expect(r.json()).toEqual({ status: "not_ready", reason: "store closed" });
    why = undefined;
    expect((await a.inject("/readyz")).json()).toEqual({ status: "ready" });
  });

  it("draining: readyz 503 at once, new work 503, other requests pass, in-flight work finishes and settles the drain", async () => {
    const { a, probes, held } = app();
    await a.listen({ port: 0, host: "127.0.0.1" });
    try {
      const base = `http://127.0.0.1:${(a.server.address() as { port: number }).port}`;
      const inFlight = fetch(`${base}/work`, { method: "POST" });
      while (held.length === 0) await new Promise((r) => setImmediate(r));
      expect(probes.inFlight).toBe(1);
      probes.drain("received SIGTERM");
      const settled = probes.settled(30_000);
      expect((await a.inject("/readyz")).json()).toEqual({ status: "draining", reason: "received SIGTERM" });
      const refused = await fetch(`${base}/work`, { method: "POST" });
      expect(refused.status).toBe(503);
      expect(((await refused.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: "draining", message: "no new work: received SIGTERM" });
      expect((await fetch(`${base}/other`, { method: "POST" })).status).toBe(200);
      held[0]!();
      expect((await inFlight).status).toBe(200);
      expect(await settled).toBe(0);
    } finally {
      await a.close();
    }
  });

  it("a drain bounded by its timeout reports what is still in flight", async () => {
    const { a, probes, held, clock } = app();
    await a.listen({ port: 0, host: "127.0.0.1" });
    try {
      const base = `http://127.0.0.1:${(a.server.address() as { port: number }).port}`;
      const inFlight = fetch(`${base}/work`, { method: "POST" }).catch(() => undefined);
      while (held.length === 0) await new Promise((r) => setImmediate(r));
      probes.drain("received SIGTERM");
      const settled = probes.settled(5000);
      clock.advance(5000);
      expect(await settled).toBe(1);
      held[0]!();
      await inFlight;
    } finally {
      await a.close();
    }
  });
});
