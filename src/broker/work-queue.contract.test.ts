// Runs the WorkQueue contract for the in-process queue (virtual clock) and for JetStream against the NATS
// server at 127.0.0.1:4222 (skipped, saying so, when none answers there). Each JetStream test uses its own
// stream names and deletes its streams after.
import { randomUUID } from "node:crypto";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { describe, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { JetStreamWorkQueue } from "./jetstream-work-queue.js";
import { MemoryWorkQueue } from "./memory-work-queue.js";
import { describeWorkQueueContract, type Job, type WorkQueueHarness } from "./work-queue.contract.js";
import type { WorkQueue } from "./work-queue.js";

const NATS = "127.0.0.1:4222";

/** Lets pending promise callbacks and I/O run. */
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describeWorkQueueContract("memory (virtual clock)", async (): Promise<WorkQueueHarness> => {
  const clock = new VirtualClock();
  let first: MemoryWorkQueue<Job> | undefined;
  const clients: MemoryWorkQueue<Job>[] = [];
  const pass = async (ms: number) => {
    for (let t = 0; t < ms; t += 10) {
      for (let i = 0; i < 5; i++) await tick();
      clock.advance(Math.min(10, ms - t));
    }
    for (let i = 0; i < 5; i++) await tick();
  };
  return {
    async open(options) {
      const q = first ? first.connect(options.onDeadLetter) : (first = MemoryWorkQueue.create<Job>("mem", options, clock));
      clients.push(q);
      return q;
    },
    async until(what, cond, limitMs) {
      for (let t = 0; !cond(); t += 10) {
        if (t > limitMs) throw new Error(`timed out (virtual ${limitMs} ms) waiting for: ${what}`);
        await pass(10);
      }
    },
    pass,
    async dispose() {
      await Promise.all(clients.map((c) => c.close()));
    },
  };
});

async function natsReachable(): Promise<boolean> {
  try {
    const nc = await connect({ servers: NATS, timeout: 1000, reconnect: false });
    await nc.close();
    return true;
  } catch {
    return false;
  }
}

if (await natsReachable()) {
  describeWorkQueueContract("jetstream (nats at 127.0.0.1:4222)", async (): Promise<WorkQueueHarness> => {
    const stream = `ARBOR_TEST_${randomUUID().replaceAll("-", "")}`;
    const clients: WorkQueue<Job>[] = [];
    const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
    return {
      async open(options) {
        const q = await JetStreamWorkQueue.connect<Job>(NATS, { ...options, stream });
        clients.push(q);
        return q;
      },
      async until(what, cond, limitMs) {
        // Wall time: the server's ack waits are real; a slow machine gets the same margin twice over.
        const deadline = Date.now() + limitMs * 2;
        while (!cond()) {
          if (Date.now() > deadline) throw new Error(`timed out (${limitMs * 2} ms) waiting for: ${what}`);
          await sleep(20);
        }
      },
      pass: sleep,
      lossyPulls: true,
      async dispose() {
        await Promise.all(clients.map((c) => c.close()));
        const nc = await connect({ servers: NATS });
        const jsm = await jetstreamManager(nc);
        for (const name of [stream, `${stream}_DEAD`]) await jsm.streams.delete(name).catch(() => false);
        await nc.close();
      },
    };
  });
} else {
  describe("WorkQueue contract: jetstream", () => {
    it.skip(`skipped: no NATS server answers at ${NATS}`, () => undefined);
  });
}
