// JetStream-only behaviour of the work queue, against the NATS server at 127.0.0.1:4222 (skipped, saying so,
// when none answers): a worker whose connection dies, no message left behind in the work stream after dead
// letters, an unreadable payload, and a stream opened again with other settings.
import { randomUUID } from "node:crypto";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import { afterEach, describe, expect, it } from "vitest";
import { ArborError } from "../core/errors.js";
import { JetStreamWorkQueue } from "./jetstream-work-queue.js";
import type { DeadLetter, WorkMessage } from "./work-queue.js";

const NATS = "127.0.0.1:4222";

async function reachable(): Promise<boolean> {
  try {
    const nc = await connect({ servers: NATS, timeout: 1000, reconnect: false });
    await nc.close();
    return true;
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function until(what: string, cond: () => boolean, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out (${limitMs} ms) waiting for: ${what}`);
    await sleep(20);
  }
}

interface Job {
  n: number;
}

const natsUp = await reachable();

describe.skipIf(!natsUp)(`JetStreamWorkQueue (nats at ${NATS})`, () => {
  let stream = "";
  const opened: { close(): Promise<void> }[] = [];
  const connections: NatsConnection[] = [];
  const dead: DeadLetter<Job>[] = [];
  const options = () => ({ stream, ackWaitMs: 1000, maxDeliver: 2, duplicateWindowMs: 60_000, onDeadLetter: (dl: DeadLetter<Job>) => dead.push(dl) });
  const open = async () => {
    const q = await JetStreamWorkQueue.connect<Job>(NATS, options());
    opened.push(q);
    return q;
  };
  const admin = async (): Promise<JetStreamManager> => {
    const nc = await connect({ servers: NATS });
    connections.push(nc);
    return jetstreamManager(nc);
  };

  afterEach(async () => {
    await Promise.all(opened.splice(0).map((q) => q.close()));
    const jsm = await admin();
    for (const name of [stream, `${stream}_DEAD`]) await jsm.streams.delete(name).catch(() => false);
    await Promise.all(connections.splice(0).map((nc) => nc.close()));
    dead.length = 0;
  });

  const fresh = () => (stream = `ARBOR_TEST_${randomUUID().replaceAll("-", "")}`);

  it("a worker whose connection dies mid-program: another worker gets the message with delivery 2", async () => {
    fresh();
    const nc = await connect({ servers: NATS });
    connections.push(nc);
    const dying = await JetStreamWorkQueue.open<Job>(nc, options());
    await dying.publish("prog-1", { n: 1 });
    const got: number[] = [];
    dying.consume(async (m) => {
      got.push(m.delivery);
      await new Promise(() => undefined); // the worker hangs, then its process goes away
    }, { maxInFlight: 1 });
    await until("the dying worker got prog-1", () => got.length === 1);
    await nc.close();
    const survivor = await open();
    const resumed: WorkMessage<Job>[] = [];
    const c = survivor.consume(async (m) => void resumed.push(m), { maxInFlight: 1 });
    await until("prog-1 redelivered", () => resumed.length === 1);
    await c.close();
    expect(resumed.map((m) => [m.id, m.delivery, m.payload.n])).toEqual([["prog-1", 2, 1]]);
  });

  it("after dead letters (handler path and advisory path) and a term, the work stream holds nothing", async () => {
    fresh();
    const q = await open();
    await q.publish("fails", { n: 1 });
    await q.publish("hangs", { n: 2 });
    await q.publish("ends", { n: 3 });
    const c = q.consume(async (m) => {
      if (m.id === "fails") throw new Error("tool exploded");
      if (m.id === "ends") return m.term("program ended: max_turns");
      await new Promise(() => undefined);
    }, { maxInFlight: 4 });
    await until("two dead letters", () => dead.length === 2);
    await c.abandon();
    const jsm = await admin();
    let left = -1;
    for (let i = 0; i < 50 && left !== 0; i++) {
      left = (await jsm.streams.info(stream)).state.messages;
      if (left !== 0) await sleep(50);
    }
    expect(left).toBe(0);
    expect(dead.map((d) => d.id).sort()).toEqual(["fails", "hangs"]);
    expect(dead.find((d) => d.id === "fails")!.reason).toContain("tool exploded");
    expect(dead.find((d) => d.id === "hangs")!.reason).toContain("ack wait");
    // A client opened later reads the same dead letters from the dead-letter stream.
    const later = await open();
    expect((await later.deadLetters()).map((d) => d.id).sort()).toEqual(["fails", "hangs"]);
  });

  it("an advisory whose message cannot be read at first (the broker busy) is retried: the dead letter still comes", async () => {
    fresh();
    const q = await open();
    const streams = (q as unknown as { jsm: JetStreamManager }).jsm.streams;
    const read = streams.getMessage.bind(streams);
    let reads = 0;
    streams.getMessage = ((...args: Parameters<typeof read>) => (reads++ === 0 ? Promise.reject(new Error("TIMEOUT")) : read(...args))) as typeof streams.getMessage;
    await q.publish("hangs", { n: 1 });
    // Free slots beside both deliveries keep a pull open: the server finds the message out of deliveries on a pull.
    const c = q.consume(() => new Promise<void>(() => undefined), { maxInFlight: 4 });
    await until("the dead letter", () => dead.length === 1, 30_000);
    await c.abandon();
    expect(reads).toBeGreaterThanOrEqual(2);
    expect(dead.map((d) => [d.id, d.reason])).toEqual([["hangs", expect.stringContaining("ack wait") as unknown]]);
    expect((await (await admin()).streams.info(stream)).state.messages).toBe(0);
  });

  it("a payload that is not JSON is dead-lettered at once, naming why", async () => {
    fresh();
    const q = await open();
    const nc = await connect({ servers: NATS });
    connections.push(nc);
    const h = headers();
    h.set("Nats-Msg-Id", "garbage-1");
    const js = (await import("@nats-io/jetstream")).jetstream(nc);
    await js.publish(`arbor.work.${stream}`, "{not json", { headers: h });
    const handled: string[] = [];
    const c = q.consume(async (m) => void handled.push(m.id), { maxInFlight: 1 });
    await until("dead letter", () => dead.length === 1);
    await c.close();
    expect(handled).toEqual([]);
    expect(dead[0]).toMatchObject({ id: "garbage-1", payload: undefined, deliveries: 1 });
    expect(dead[0]!.reason).toMatch(/not JSON/);
  });

  it("opening the queue again with another ack wait is refused, naming the consumer", async () => {
    fresh();
    await open();
    const err = await JetStreamWorkQueue.connect<Job>(NATS, { ...options(), ackWaitMs: 5000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ArborError);
    expect((err as ArborError).code).toBe("broker_setup");
    expect((err as ArborError).message).toContain("consumer workers");
  });
});

describe.skipIf(natsUp)("JetStreamWorkQueue", () => {
  it.skip(`skipped: no NATS server answers at ${NATS}`, () => undefined);
});

describe("JetStreamWorkQueue without a server", () => {
  it("names the address it cannot reach", async () => {
    const err = await JetStreamWorkQueue.connect(`127.0.0.1:1`, { stream: "X", ackWaitMs: 1000, maxDeliver: 2, duplicateWindowMs: 1000 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ArborError);
    expect((err as ArborError).code).toBe("broker_unreachable");
    expect((err as ArborError).message).toContain("127.0.0.1:1");
  });
});
