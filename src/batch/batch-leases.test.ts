// Leases of batches out with trainers on a virtual clock: expiry requeues, or acks after an announcement; heartbeats
// renew; an announcement in progress holds the lease; bad lengths are refused.
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { BatchLeases, type LeaseOutcome } from "./batch-leases.js";

function leases(leaseMs = 100): { clock: VirtualClock; l: BatchLeases; expired: [string, LeaseOutcome][] } {
  const clock = new VirtualClock();
  const expired: [string, LeaseOutcome][] = [];
  return { clock, l: new BatchLeases({ leaseMs, clock, onExpired: (id, o) => void expired.push([id, o]) }), expired };
}

describe("BatchLeases", () => {
  it("requeues a batch whose lease runs out, unless heartbeats renew it; ended leases never expire", () => {
    const { clock, l, expired } = leases();
    l.start("a");
    l.start("b");
    clock.advance(60);
    expect(l.renew("a")).toBe(true);
    clock.advance(60);
    expect(expired).toEqual([["b", "requeue"]]);
    expect(l.renew("b")).toBe(false);
    l.end("a");
    clock.advance(1000);
    expect(expired).toEqual([["b", "requeue"]]);
    expect(l.size).toBe(0);
  });

  it("holds the lease while weights are announced, and acks on expiry once they were loaded", () => {
    const { clock, l, expired } = leases();
    l.start("a");
    l.start("b");
    l.hold("a");
    l.hold("b");
    clock.advance(500);
    expect(expired).toEqual([]);
    // A heartbeat during the announcement does not arm the timer again.
    expect(l.renew("a")).toBe(true);
    clock.advance(500);
    expect(expired).toEqual([]);
    l.announced("a", true);
    l.announced("b", false);
    clock.advance(100);
    expect(expired).toEqual([
      ["a", "ack"],
      ["b", "requeue"],
    ]);
  });

  it("refuses a lease that is not a positive integer of ms", () => {
    expect(() => leases(0)).toThrow(/leaseMs must be an integer >= 1, got 0/);
    expect(() => leases(1.5)).toThrow(/leaseMs must be an integer >= 1, got 1.5/);
  });
});
