import { describe, expect, it } from "vitest";
import { createLeastLoadedPolicy } from "./least-loaded.js";
import { Router, type RoutingPolicy } from "./router.js";
import { createRoutingPolicy, routingPolicyNames } from "./routing-registry.js";

describe("least-loaded policy", () => {
  it("picks the backend with the fewest in-flight calls", () => {
    const p = createLeastLoadedPolicy();
    const c = [
      { name: "a", inFlight: 3 },
      { name: "b", inFlight: 1 },
      { name: "c", inFlight: 2 },
    ];
    expect(p.pick(c, "x")).toBe("b");
    expect(p.pick(c, "x")).toBe("b");
  });

  it("breaks ties round-robin, deterministically", () => {
    const p = createLeastLoadedPolicy();
    const even = ["a", "b", "c"].map((name) => ({ name, inFlight: 0 }));
    expect([1, 2, 3, 4].map(() => p.pick(even, "x"))).toEqual(["a", "b", "c", "a"]);
    // After a pick of b, a tie between a and c starts looking after b.
    const q = createLeastLoadedPolicy();
    expect(q.pick([{ name: "a", inFlight: 1 }, { name: "b", inFlight: 0 }, { name: "c", inFlight: 1 }], "x")).toBe("b");
    expect(q.pick([{ name: "a", inFlight: 1 }, { name: "b", inFlight: 1 }, { name: "c", inFlight: 1 }], "x")).toBe("c");
    expect(() => q.pick([], "x")).toThrow("no backend");
  });
});

describe("Router", () => {
  it("spreads concurrent calls and releases them", () => {
    const r = new Router(["a", "b"], createLeastLoadedPolicy());
    const got = [r.acquire("p1"), r.acquire("p2"), r.acquire("p3"), r.acquire("p4")];
    expect(got.sort()).toEqual(["a", "a", "b", "b"]);
    r.done("a");
    expect(r.acquire("p5")).toBe("a");
    expect(r.loads()).toEqual([
      { name: "a", inFlight: 2 },
      { name: "b", inFlight: 2 },
    ]);
  });

  it("rejects bad setups and bad policy answers", () => {
    expect(() => new Router([], createLeastLoadedPolicy())).toThrow("needs at least one backend");
    expect(() => new Router(["a", "a"], createLeastLoadedPolicy())).toThrow("backend name 'a' is used twice");
    const rogue: RoutingPolicy = { name: "rogue", pick: () => "zzz" };
    expect(() => new Router(["a"], rogue).acquire("p")).toThrow("routing policy 'rogue' picked unknown backend 'zzz'");
    expect(() => new Router(["a"], createLeastLoadedPolicy()).done("a")).toThrow("no call in flight on 'a'");
  });
});

describe("routing registry", () => {
  it("creates policies by name and lists the known ones for unknown names", () => {
    expect(routingPolicyNames).toContain("least-loaded");
    expect(createRoutingPolicy("least-loaded").name).toBe("least-loaded");
    expect(() => createRoutingPolicy("random")).toThrow("gateway.routing: unknown policy 'random' (known: least-loaded)");
  });
});
