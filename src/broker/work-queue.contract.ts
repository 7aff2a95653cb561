// The WorkQueue contract: every implementation (JetStream, in-process) runs this suite
// (`work-queue.contract.test.ts`). Time passes only through the harness, so the in-process queue runs it on a
// virtual clock and JetStream on the wall clock against a real server.
import { afterEach, describe, expect, it } from "vitest";
import type { DeadLetter, WorkConsumer, WorkMessage, WorkQueue, WorkQueueOptions } from "./work-queue.js";

/** The payload the suite publishes. */
export interface Job {
  n: number;
}

/** One fresh queue (unique name) and a way to let its time pass. */
export interface WorkQueueHarness {
  /** Opens another client of this harness's queue (for JetStream: its own connection), as a worker would. */
  open(options: WorkQueueOptions<Job>): Promise<WorkQueue<Job>>;
  /** Lets time pass until `cond` holds; throws naming `what` after `limitMs` of queue time. */
  until(what: string, cond: () => boolean, limitMs: number): Promise<void>;
  /** Lets `ms` of queue time pass. */
  pass(ms: number): Promise<void>;
  /** Closes what `open` made and deletes the queue's streams. */
  dispose(): Promise<void>;
  /**
   * True when a redelivery may reach no handler: JetStream can send one to a pull request that expired as it
   * arrived (the server counts it, or takes it back and sends that number again), so a handler may see a number
   * skipped or repeated, never past maxDeliver.
   */
  readonly lossyPulls?: boolean;
}

interface Deferred {
  promise: Promise<void>;
  resolve(): void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** Runs the contract for one implementation; `make` gives a fresh queue for each test. */
export function describeWorkQueueContract(name: string, make: () => Promise<WorkQueueHarness>, ackWaitMs = 1000): void {
  describe(`WorkQueue contract: ${name}`, () => {
    let h: WorkQueueHarness | undefined;
    const dead: DeadLetter<Job>[] = [];
    const options = (): WorkQueueOptions<Job> => ({
      ackWaitMs,
      maxDeliver: 3,
      duplicateWindowMs: 60_000,
      onDeadLetter: (dl) => dead.push(dl),
    });
    const start = async (): Promise<WorkQueueHarness> => {
      dead.length = 0;
      h = await make();
      return h;
    };
    const limit = ackWaitMs * 10;

    afterEach(async () => {
      await h?.dispose();
      h = undefined;
    });

    it("de-duplicates a publish of the same id and delivers each id once", async () => {
      const h = await start();
      const q = await h.open(options());
      expect(await q.publish("a", { n: 1 })).toEqual({ duplicate: false });
      expect(await q.publish("a", { n: 2 })).toEqual({ duplicate: true });
      expect(await q.publish("b", { n: 3 })).toEqual({ duplicate: false });
      const seen: string[] = [];
      const c = q.consume(async (m) => void seen.push(`${m.id}:${m.payload.n}:${m.delivery}`), { maxInFlight: 4 });
      await h.until("both messages handled", () => seen.length === 2, limit);
      await h.pass(ackWaitMs * 2);
      await c.close();
      expect(seen.sort()).toEqual(["a:1:1", "b:3:1"]);
      expect(await q.deadLetters()).toEqual([]);
    });

    it("an acked message leaves the queue: no other consumer gets it after the ack wait", async () => {
      const h = await start();
      const q = await h.open(options());
      await q.publish("x", { n: 1 });
      let handled = 0;
      const first = q.consume(async (m) => {
        handled++;
        await m.ack();
      }, { maxInFlight: 1 });
      await h.until("x handled", () => handled === 1, limit);
      await first.close();
      const other = await h.open(options());
      const later: string[] = [];
      const second = other.consume(async (m) => void later.push(m.id), { maxInFlight: 1 });
      await h.pass(ackWaitMs * 2.5);
      await second.close();
      expect(later).toEqual([]);
    });

    it("a consumer that dies without acking: the message is redelivered to another after the ack wait, delivery 2", async () => {
      const h = await start();
      const workerA = await h.open(options());
      const workerB = await h.open(options());
      await workerA.publish("p1", { n: 7 });
      const hang = deferred();
      const gotA: WorkMessage<Job>[] = [];
      const a = workerA.consume(async (m) => {
        gotA.push(m);
        await hang.promise;
      }, { maxInFlight: 1 });
      await h.until("worker A got p1", () => gotA.length === 1, limit);
      expect(gotA[0]!.delivery).toBe(1);
      await a.abandon();
      const gotB: { id: string; delivery: number; n: number }[] = [];
      const b = workerB.consume(async (m) => void gotB.push({ id: m.id, delivery: m.delivery, n: m.payload.n }), {
        maxInFlight: 1,
      });
      await h.until("worker B got p1 again", () => gotB.length === 1, limit);
      expect(gotB).toEqual([{ id: "p1", delivery: 2, n: 7 }]);
      // The dead worker's handler finishing late settles nothing.
      hang.resolve();
      await h.pass(ackWaitMs * 2);
      await b.close();
      expect(gotB).toHaveLength(1);
      expect(dead).toEqual([]);
    });

    it("a nak (or a throwing handler) redelivers with the delivery count raised", async () => {
      const h = await start();
      const q = await h.open(options());
      await q.publish("n1", { n: 1 });
      await q.publish("t1", { n: 2 });
      const seen: string[] = [];
      const c = q.consume(async (m) => {
        seen.push(`${m.id}:${m.delivery}`);
        if (m.delivery === 1 && m.id === "n1") await m.nak(10);
        else if (m.delivery === 1) throw new Error("transient");
        else await m.ack();
      }, { maxInFlight: 2 });
      await h.until("both redelivered", () => seen.length === 4, limit);
      await h.pass(ackWaitMs * 2);
      await c.close();
      expect(seen.sort()).toEqual(["n1:1", "n1:2", "t1:1", "t1:2"]);
      expect(dead).toEqual([]);
    });

    it("maxDeliver exceeded: dead-lettered with the last error, exactly once across workers", async () => {
      const h = await start();
      const workerA = await h.open(options());
      const workerB = await h.open(options());
      await workerA.publish("bad", { n: 9 });
      const deliveries: number[] = [];
      const handler = async (m: WorkMessage<Job>) => {
        deliveries.push(m.delivery);
        throw new Error(`tool crashed on try ${m.delivery}`);
      };
      const a = workerA.consume(handler, { maxInFlight: 1 });
      const b = workerB.consume(handler, { maxInFlight: 1 });
      await h.until("dead letter reported", () => dead.length === 1, limit);
      await h.pass(ackWaitMs * 2);
      await Promise.all([a.close(), b.close()]);
      expect(deliveries.sort()).toEqual([1, 2, 3]);
      expect(dead).toHaveLength(1);
      expect(dead[0]).toMatchObject({ id: "bad", payload: { n: 9 }, deliveries: 3 });
      expect(dead[0]!.reason).toContain("tool crashed on try 3");
      expect(await workerB.deadLetters()).toEqual(dead);
    });

    it("maxDeliver exceeded by ack waits running out: dead-lettered once, naming the ack wait", async () => {
      const h = await start();
      const q = await h.open(options());
      await q.publish("stuck", { n: 4 });
      const deliveries: number[] = [];
      const never = deferred();
      const c = q.consume(async (m) => {
        deliveries.push(m.delivery);
        await never.promise;
      }, { maxInFlight: 4 });
      await h.until("dead letter reported", () => dead.length === 1, limit * 2);
      await c.abandon();
      never.resolve();
      await h.pass(ackWaitMs * 2);
      if (h.lossyPulls) {
        expect(deliveries[0]).toBe(1);
        expect(deliveries.every((d, i) => d <= 3 && (i === 0 || d >= (deliveries[i - 1] as number)))).toBe(true);
      } else {
        expect(deliveries).toEqual([1, 2, 3]);
      }
      expect(dead).toHaveLength(1);
      expect(dead[0]).toMatchObject({ id: "stuck", payload: { n: 4 }, deliveries: 3 });
      expect(dead[0]!.reason).toMatch(/ack wait/);
      expect(await q.deadLetters()).toHaveLength(1);
    });

    it("two consumers never hold the same message at once, and each holds at most maxInFlight", async () => {
      const h = await start();
      const workerA = await h.open(options());
      const workerB = await h.open(options());
      const total = 20;
      for (let i = 0; i < total; i++) await workerA.publish(`m${i}`, { n: i });
      const holding = new Set<string>();
      const violations: string[] = [];
      const handled: string[] = [];
      const held = { a: 0, b: 0 };
      const handler = (who: "a" | "b") => async (m: WorkMessage<Job>) => {
        if (holding.has(m.id)) violations.push(`${m.id} held twice`);
        holding.add(m.id);
        held[who]++;
        if (held[who] > 3) violations.push(`${who} holds ${held[who]} > maxInFlight 3`);
        await h.pass(5);
        holding.delete(m.id);
        held[who]--;
        handled.push(`${m.id}:${m.delivery}`);
      };
      const consumers: WorkConsumer[] = [
        workerA.consume(handler("a"), { maxInFlight: 3 }),
        workerB.consume(handler("b"), { maxInFlight: 3 }),
      ];
      await h.until("all handled", () => handled.length === total, limit);
      await Promise.all(consumers.map((c) => c.close()));
      expect(violations).toEqual([]);
      expect(handled.sort()).toEqual(Array.from({ length: total }, (_, i) => `m${i}:1`).sort());
    });

    it("inProgress extends the ack wait: a long handler keeps its message past several ack waits", async () => {
      const h = await start();
      const workerA = await h.open(options());
      const workerB = await h.open(options());
      await workerA.publish("long", { n: 1 });
      const seen: string[] = [];
      let done = false;
      const a = workerA.consume(async (m) => {
        seen.push(`a:${m.delivery}`);
        for (let i = 0; i < 5; i++) {
          await h.pass(ackWaitMs / 2);
          await m.inProgress();
        }
        await m.ack();
        done = true;
      }, { maxInFlight: 1 });
      // B joins once A holds the message (either could win the first pull), so B is there to take a redelivery.
      await h.until("a holds the message", () => seen.length > 0, limit);
      const b = workerB.consume(async (m) => void seen.push(`b:${m.delivery}`), { maxInFlight: 1 });
      await h.until("long handler done", () => done, limit);
      await h.pass(ackWaitMs * 1.5);
      await Promise.all([a.close(), b.close()]);
      expect(seen).toEqual(["a:1"]);
    });

    it("close drains: it waits for in-flight handlers, whose settlement holds", async () => {
      const h = await start();
      const q = await h.open(options());
      await q.publish("d1", { n: 1 });
      const release = deferred();
      let started = false;
      let finished = false;
      const c = q.consume(async () => {
        started = true;
        await release.promise;
        finished = true;
      }, { maxInFlight: 1 });
      await h.until("handler started", () => started, limit);
      let closed = false;
      const closing = c.close().then(() => (closed = true));
      await h.pass(50);
      expect(closed).toBe(false);
      expect(c.inFlight).toBe(1);
      release.resolve();
      await closing;
      expect(finished).toBe(true);
      const other = await h.open(options());
      const later: string[] = [];
      const second = other.consume(async (m) => void later.push(m.id), { maxInFlight: 1 });
      await h.pass(ackWaitMs * 2.5);
      await second.close();
      expect(later).toEqual([]);
    });
  });
}
