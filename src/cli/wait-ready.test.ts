// waitReady: a gateway that comes up late is waited for, said once; one that never does fails naming the last answer.
import Fastify from "fastify";
import { describe, expect, it } from "vitest";
import { realClock } from "../core/real-clock.js";
import { waitReady } from "./wait-ready.js";

describe("waitReady", () => {
  it("waits for a gateway that is not ready yet, saying so once", async () => {
    const app = Fastify();
    let calls = 0;
    app.get("/readyz", async (_req, reply) => (++calls < 3 ? reply.code(503).send("store not open") : { status: "ready" }));
    const url = await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const lines: string[] = [];
      await waitReady(url, realClock, 30_000, (l) => lines.push(l));
      expect(calls).toBe(3);
      expect(lines).toEqual([`gateway  ${url} not ready yet (503 store not open); waiting up to 30 s`]);
    } finally {
      await app.close();
    }
  });

  it("fails after its time with the last answer and the likely cause", async () => {
    const app = Fastify();
    const url = await app.listen({ host: "127.0.0.1", port: 0 });
    await app.close();
    const lines: string[] = [];
    await expect(waitReady(url, realClock, 1200, (l) => lines.push(l))).rejects.toThrow(`gateway ${url} is not ready after 1.2 s (fetch failed); is arbor serve gateway running?`);
    expect(lines).toHaveLength(1);
  });
});
