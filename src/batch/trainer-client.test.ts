// The client's failure modes against real sockets: an unreachable server and a server that does not speak
// the protocol both give one clear error.
import Fastify from "fastify";
import { describe, expect, it } from "vitest";
import { ArborError } from "../core/errors.js";
import { TrainerClient } from "./trainer-client.js";

describe("TrainerClient errors", () => {
  it("names the URL when the server cannot be reached", async () => {
    const app = Fastify();
    const address = await app.listen({ host: "127.0.0.1", port: 0 });
    await app.close(); // the port is now closed
    const err = await new TrainerClient(address).stats().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ArborError);
    expect((err as Error).message).toMatch(/trainer protocol: cannot reach http:\/\/127\.0\.0\.1:\d+\/v1\/stats: ECONNREFUSED/);
  });

  it("rejects a body that is not an Arbor Arrow batch and passes server errors through", async () => {
    const app = Fastify();
    app.get("/v1/batches/next", async (_req, reply) => reply.header("x-arbor-batch-id", "b").send("not arrow"));
    app.post("/v1/weights", async (_req, reply) => reply.code(500).send({ error: "disk full" }));
    const address = await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const c = new TrainerClient(address);
      await expect(c.nextBatch()).rejects.toThrow(/arrow batch: not an Arrow IPC file/);
      await expect(c.announceWeights(1, "/m.gguf")).rejects.toThrow(/POST \/v1\/weights: HTTP 500 \(disk full\)/);
      await expect(c.ack("x")).rejects.toThrow(/ack x: HTTP 404/);
    } finally {
      await app.close();
    }
  });
});
