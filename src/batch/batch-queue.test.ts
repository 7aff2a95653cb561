import { describe, expect, it } from "vitest";
import { CapacityError } from "../core/errors.js";
import { BatchQueue, type QueuedBatch } from "./batch-queue.js";

const b = (id: string): QueuedBatch => ({ id, bytes: new Uint8Array([1]), samples: 1, flatTokens: 10, treeTokens: 4 });

describe("BatchQueue", () => {
  it("is FIFO, counts in-flight batches against capacity, and requeues at the head", () => {
    const q = new BatchQueue(2);
    q.push(b("a"));
    q.push(b("b"));
    expect(() => q.push(b("c"))).toThrow(CapacityError);
    expect(q.next()?.id).toBe("a");
    expect(() => q.push(b("c"))).toThrow(/trainer batch queue is full \(limit 2\)/); // "a" is still in flight
    q.requeue("a");
    expect(q.next()?.id).toBe("a");
    q.ack("a");
    q.push(b("c"));
    expect([q.next()?.id, q.next()?.id, q.next()]).toEqual(["b", "c", undefined]);
    expect(q.stats()).toEqual({ capacity: 2, queued: 0, inFlight: 2, enqueued: 3, delivered: 4, acked: 1, requeued: 1, ackedFlatTokens: 10, ackedTreeTokens: 4 });
  });

  it("withdraws a queued or in-flight batch: its room is free, its ack and requeue refused", () => {
    const q = new BatchQueue(2);
    q.push(b("a"));
    q.push(b("b"));
    expect(q.next()?.id).toBe("a");
    expect(q.withdraw("a")).toBe(true);
    expect(q.withdraw("b")).toBe(true);
    expect(q.withdraw("c")).toBe(false);
    expect(() => q.ack("a")).toThrow(/batch 'a' is not in flight/);
    expect(() => q.requeue("a")).toThrow(/batch 'a' is not in flight/);
    expect(q.next()).toBeUndefined();
    q.push(b("a"));
    q.push(b("c"));
    expect(q.stats()).toMatchObject({ queued: 2, inFlight: 0 });
  });

  it("refuses unknown acks, duplicate ids and a bad capacity", () => {
    const q = new BatchQueue(3);
    q.push(b("a"));
    expect(() => q.ack("a")).toThrow(/batch 'a' is not in flight/);
    expect(() => q.push(b("a"))).toThrow(/already queued or in flight/);
    expect(() => new BatchQueue(0)).toThrow(/capacity must be an integer >= 1/);
  });
});
