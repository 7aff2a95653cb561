// DeliveryCounts: a redelivery the server misnumbers is numbered from what this client saw; settled messages and
// the oldest beyond the bound are forgotten; no number is past maxDeliver.
import { describe, expect, it } from "vitest";
import { DeliveryCounts } from "./delivery-counts.js";

describe("DeliveryCounts", () => {
  it("keeps the server's numbers when they are right", () => {
    const c = new DeliveryCounts(8, 3);
    expect([c.delivered(5, 1), c.delivered(5, 2), c.delivered(5, 3)]).toEqual([1, 2, 3]);
  });

  it("numbers a redelivery the server reports as 1 one past the last seen (nats-server 2.9's [1, 2, 1])", () => {
    const c = new DeliveryCounts(8, 3);
    expect([c.delivered(5, 1), c.delivered(5, 2), c.delivered(5, 1)]).toEqual([1, 2, 3]);
  });

  it("takes the server's number when it is ahead (deliveries that went to other clients)", () => {
    const c = new DeliveryCounts(8, 3);
    expect([c.delivered(5, 1), c.delivered(5, 3)]).toEqual([1, 3]);
  });

  it("never numbers a delivery past maxDeliver (a failed delivery the server took back and sent again: CI's [1, 3, 4])", () => {
    const c = new DeliveryCounts(8, 3);
    expect([c.delivered(5, 1), c.delivered(5, 3), c.delivered(5, 3)]).toEqual([1, 3, 3]);
    expect(c.delivered(6, 7)).toBe(3);
  });

  it("forgets a settled message, so a new message at the same sequence starts from the server's number", () => {
    const c = new DeliveryCounts(8, 3);
    c.delivered(5, 2);
    c.settled(5);
    expect(c.size).toBe(0);
    expect(c.delivered(5, 1)).toBe(1);
  });

  it("holds at most `capacity` messages, forgetting the one seen longest ago", () => {
    const c = new DeliveryCounts(2, 3);
    c.delivered(1, 1);
    c.delivered(2, 1);
    c.delivered(1, 2); // 1 is now the most recently seen
    c.delivered(3, 1); // evicts 2
    expect(c.size).toBe(2);
    expect(c.delivered(2, 1)).toBe(1);
    expect(c.delivered(3, 1)).toBe(2);
  });

  it("refuses a capacity or maxDeliver below 1, naming it", () => {
    expect(() => new DeliveryCounts(0, 3)).toThrow(/capacity must be an integer >= 1, got 0/);
    expect(() => new DeliveryCounts(8, 0)).toThrow(/maxDeliver must be an integer >= 1, got 0/);
  });
});
