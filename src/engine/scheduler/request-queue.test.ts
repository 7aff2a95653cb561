// The waiting queue's ordering under both policies.

import { describe, expect, it } from "vitest";
import { RequestQueue } from "./request-queue.js";

const q = (id: string, priority: number, arrivalTime: number, seq: number) => ({ id, priority, arrivalTime, seq });

describe("RequestQueue", () => {
  it("fcfs: arrivals at the back, preempted requests at the front", () => {
    const rq = new RequestQueue<ReturnType<typeof q>>("fcfs");
    rq.add(q("a", 9, 0, 0));
    rq.add(q("b", 0, 1, 1));
    rq.prepend(q("c", 5, 2, 2));
    expect([...rq].map((x) => x.id)).toEqual(["c", "a", "b"]);
    expect(rq.removeAt(1).id).toBe("a");
    expect(() => rq.removeAt(5)).toThrow(RangeError);
  });

  it("priority: ordered by (priority, arrival, admission order) whether added or prepended", () => {
    const rq = new RequestQueue<ReturnType<typeof q>>("priority");
    rq.add(q("late", 1, 5, 0));
    rq.add(q("urgent", 0, 9, 1));
    rq.prepend(q("early", 1, 2, 2));
    rq.add(q("tie", 1, 5, 3));
    expect([...rq].map((x) => x.id)).toEqual(["urgent", "early", "late", "tie"]);
    const early = rq.at(1);
    expect(early && rq.remove(early)).toBe(true);
    expect(rq.length).toBe(3);
  });
});
