import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { GatewayRejection } from "./auth-errors.js";
import { ProgramLimiter } from "./program-limiter.js";

function rejection(fn: () => unknown): GatewayRejection {
  try {
    fn();
  } catch (e) {
    if (e instanceof GatewayRejection) return e;
    throw e;
  }
  throw new Error("expected a rejection");
}

describe("ProgramLimiter", () => {
  it("caps calls in flight per program, independently per program", () => {
    const l = new ProgramLimiter(new VirtualClock(), { maxInFlightPerProgram: 2 });
    const d1 = l.admit("a");
    const d2 = l.admit("a");
    const r = rejection(() => l.admit("a"));
    expect(r.status).toBe(429);
    expect(r.code).toBe("rate_limit_exceeded");
    expect(r.message).toMatch(/2 calls in flight \(limit 2\)/);
    l.admit("b");
    d1();
    d1(); // idempotent: does not free a second slot
    l.admit("a");
    expect(l.inFlight("a")).toBe(2);
    expect(() => l.admit("a")).toThrow(GatewayRejection);
    d2();
    expect(l.inFlight("a")).toBe(1);
  });

  it("refills the token bucket with the clock and says when to retry", () => {
    const clock = new VirtualClock(0);
    const l = new ProgramLimiter(clock, { requestsPerSecond: 2, burst: 3 });
    for (let i = 0; i < 3; i++) l.admit("a")();
    const r = rejection(() => l.admit("a"));
    expect(r.status).toBe(429);
    expect(r.headers["retry-after"]).toBe("1");
    expect(r.message).toMatch(/retry in 500 ms/);
    clock.advance(499);
    expect(() => l.admit("a")).toThrow(/exceeded 2 requests\/s/);
    clock.advance(1);
    l.admit("a")();
    expect(() => l.admit("a")).toThrow(GatewayRejection);
    clock.advance(10_000); // refills to the burst, never beyond
    for (let i = 0; i < 3; i++) l.admit("a")();
    expect(() => l.admit("a")).toThrow(GatewayRejection);
    l.admit("other")();
  });

  it("a call refused for concurrency spends no rate token", () => {
    const l = new ProgramLimiter(new VirtualClock(), { requestsPerSecond: 1, burst: 2, maxInFlightPerProgram: 1 });
    const d = l.admit("a");
    expect(() => l.admit("a")).toThrow(/in flight/);
    d();
    l.admit("a")();
    expect(() => l.admit("a")).toThrow(/requests\/s/);
  });

  it("keeps no state without limits and drops idle full buckets", () => {
    const unlimited = new ProgramLimiter(new VirtualClock());
    expect(unlimited.active).toBe(false);
    for (let i = 0; i < 100; i++) unlimited.admit("a");
    expect(unlimited.size).toBe(0);
    const l = new ProgramLimiter(new VirtualClock(), { maxInFlightPerProgram: 4 });
    l.admit("a")();
    expect(l.size).toBe(0);
    const d = l.admit("b");
    l.forget("b");
    d();
    expect(l.inFlight("b")).toBe(0);
  });

  it("sweeps idle programs once the map has grown", () => {
    const clock = new VirtualClock();
    const l = new ProgramLimiter(clock, { requestsPerSecond: 1, burst: 1 });
    for (let i = 0; i < 1024; i++) l.admit(`p${i}`)();
    expect(l.size).toBe(1024);
    clock.advance(1000);
    l.admit("late")();
    expect(l.size).toBe(1);
  });

  it("rejects bad limits with the field name", () => {
    const c = new VirtualClock();
    expect(() => new ProgramLimiter(c, { maxInFlightPerProgram: 0 })).toThrow(/maxInFlightPerProgram/);
    expect(() => new ProgramLimiter(c, { requestsPerSecond: -1 })).toThrow(/requestsPerSecond/);
    expect(() => new ProgramLimiter(c, { requestsPerSecond: 1, burst: 0.5 })).toThrow(/burst/);
  });
});
