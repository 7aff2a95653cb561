// Runs the EventBus contract in process and on JetStream against the NATS server at 127.0.0.1:4222 (skipped,
// saying so, when none answers there); each JetStream test has its own stream and deletes it after.
import { randomUUID } from "node:crypto";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { describe, it } from "vitest";
import { describeEventBusContract, type EventBusHarness, type TestEvents } from "./event-bus.contract.js";
import type { EventBus } from "./event-bus.js";
import { JetStreamEventBus } from "./jetstream-event-bus.js";
import { MemoryEventBus } from "./memory-event-bus.js";

const NATS = "127.0.0.1:4222";
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function until(what: string, cond: () => boolean): Promise<void> {
  for (let i = 0; !cond(); i++) {
    if (i > 500) throw new Error(`timed out waiting for: ${what}`);
    await sleep(20);
  }
}

describeEventBusContract("memory", async (): Promise<EventBusHarness> => {
  const bus = new MemoryEventBus<TestEvents>("mem");
  return { open: async () => bus, until, settle: () => sleep(20), dispose: () => bus.close() };
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
  describeEventBusContract("jetstream (nats at 127.0.0.1:4222)", async (): Promise<EventBusHarness> => {
    const stream = `ARBOR_EVT_${randomUUID().replaceAll("-", "")}`;
    const clients: EventBus<TestEvents>[] = [];
    return {
      async open() {
        const bus = await JetStreamEventBus.connect<TestEvents>(NATS, { stream });
        clients.push(bus);
        return bus;
      },
      until,
      settle: () => sleep(300),
      async dispose() {
        await Promise.all(clients.map((c) => c.close()));
        const nc = await connect({ servers: NATS });
        await (await jetstreamManager(nc)).streams.delete(stream).catch(() => false);
        await nc.close();
      },
    };
  });
} else {
  describe("EventBus contract: jetstream", () => {
    it.skip(`skipped: no NATS server answers at ${NATS}`, () => undefined);
  });
}
