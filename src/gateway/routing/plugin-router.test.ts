import { describe, expect, it } from "vitest";
import { Rng } from "../../core/rng.js";
import { createCapacityFilter } from "./capacity-filter.js";
import { createHealthyFilter } from "./healthy-filter.js";
import { createKvUsageScorer } from "./kv-usage.js";
import { createLeastLoadScorer } from "./least-load.js";
import { PluginRouter, type PluginRouterOptions } from "./plugin-router.js";
import { createPrefixAffinityScorer } from "./prefix-affinity.js";
import { createStickyProgramScorer } from "./sticky-program.js";
import type { RoutingScorer } from "./types.js";

const seq = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);

function router(scorers: PluginRouterOptions["scorers"], extra: Partial<PluginRouterOptions> = {}): PluginRouter {
  return new PluginRouter({ backends: ["a", "b", "c"], filters: [createHealthyFilter(), createCapacityFilter()], scorers, ...extra });
}

describe("PluginRouter", () => {
  it("tracks in-flight calls, prefill and decode load, and releases them on finish", () => {
    const r = router([{ scorer: createLeastLoadScorer(), weight: 1 }]);
    const d1 = r.route({ programId: "p1", promptTokens: seq(0, 40) });
    const d2 = r.route({ programId: "p2", estimatedPromptTokens: 10 });
    expect([d1.backend, d2.backend]).toEqual(["a", "b"]);
    let a = r.views()[0];
    expect(a).toMatchObject({ inFlight: 1, activeTokens: 40, activePrefillTokens: 40, treeTokens: 40, programs: 1 });
    r.onPrefillDone(d1.id);
    expect(r.views()[0]).toMatchObject({ activePrefillTokens: 0, activeTokens: 40 });
    r.onFinished(d1.id, { outputTokens: seq(100, 5) });
    a = r.views()[0];
    expect(a).toMatchObject({ inFlight: 0, activeTokens: 0, activePrefillTokens: 0, treeTokens: 45, programs: 1 });
    r.onFinished(d2.id, { outputTokens: 3 });
    expect(r.views()[1]).toMatchObject({ inFlight: 0, treeTokens: 0 });
    expect(() => r.onFinished(d1.id, { outputTokens: 0 })).toThrow("no call in flight with id 1");
  });

  it("counts only the uncached part of a prompt as prefill load", () => {
    const r = router([{ scorer: createStickyProgramScorer(), weight: 1 }]);
    const first = r.route({ programId: "p", promptTokens: seq(0, 30) });
    r.onFinished(first.id, { outputTokens: seq(500, 10) });
    // Next turn extends prompt + output: 40 tokens cached on the same backend, 20 new.
    const next = r.route({ programId: "p", promptTokens: [...seq(0, 30), ...seq(500, 10), ...seq(900, 20)] });
    expect(next.backend).toBe(first.backend);
    expect(r.views().find((v) => v.name === next.backend)).toMatchObject({ activePrefillTokens: 20, activeTokens: 60 });
  });

  it("failed calls leave nothing new cached", () => {
    const r = router([{ scorer: createLeastLoadScorer(), weight: 1 }]);
    const d = r.route({ programId: "p", promptTokens: seq(0, 10) });
    r.onFinished(d.id, { outputTokens: seq(50, 10), ok: false });
    expect(r.views()[0]?.treeTokens).toBe(10);
  });

  it("prefix affinity follows the cache when balanced and the load when imbalanced", () => {
    const r = router([{ scorer: createPrefixAffinityScorer(), weight: 1 }]);
    const system = seq(0, 50);
    const d = r.route({ programId: "p1", promptTokens: [...system, 7, 7] });
    // Same system prompt from another program: 50/52 matched on d.backend.
    const e = r.route({ programId: "p2", promptTokens: [...system, 8, 8] });
    expect(e.backend).toBe(d.backend);
    // Pile 65 calls (no tokens) on that backend: now imbalanced, the shared prefix no longer wins.
    r.setQueued(d.backend, 65);
    const f = r.route({ programId: "p3", promptTokens: [...system, 9, 9] });
    expect(f.backend).not.toBe(d.backend);
  });

  it("sticky-program binds programs through the router, and release unbinds them", () => {
    const r = router([{ scorer: createStickyProgramScorer(), weight: 1 }]);
    const first = r.route({ programId: "p" });
    r.setQueued(first.backend, 5);
    expect(r.route({ programId: "p" }).backend).toBe(first.backend);
    expect(r.boundBackend("p")).toBe(first.backend);
    r.releaseProgram("p");
    expect(r.boundBackend("p")).toBeUndefined();
    expect(r.route({ programId: "p" }).backend).not.toBe(first.backend);
  });

  it("combines scorers by weight: the max weighted sum wins", () => {
    // a: least loaded; b: emptiest KV. Weights decide.
    const setup = (wLoad: number, wKv: number): PluginRouter => {
      const r = router([
        { scorer: createLeastLoadScorer(), weight: wLoad },
        { scorer: createKvUsageScorer(), weight: wKv },
      ]);
      r.setQueued("b", 2);
      r.setQueued("c", 4);
      r.updateMetrics("a", { kvUsage: 0.9 });
      r.updateMetrics("b", { kvUsage: 0.1 });
      r.updateMetrics("c", { kvUsage: 0.5 });
      return r;
    };
    // least-load: a 1, b 0.5, c 0; kv-usage: a 0.1, b 0.9, c 0.5
    const d1 = setup(2, 1).route({ programId: "p" }); // a 2.1, b 1.9, c 0.5
    expect(d1.backend).toBe("a");
    expect(d1.totals.map((t) => t.total)).toEqual([2.1, 1.9, 0.5].map((x) => expect.closeTo(x, 9)));
    expect(setup(1, 2).route({ programId: "p" }).backend).toBe("b"); // a 1.2, b 2.3, c 1
  });

  it("breaks ties round-robin over the backend order", () => {
    const flat: RoutingScorer = { name: "flat", score: (ctx) => ctx.backends.map(() => 1) };
    const r = router([{ scorer: flat, weight: 1 }]);
    expect([1, 2, 3, 4, 5].map(() => r.route({ programId: "p" }).backend)).toEqual(["a", "b", "c", "a", "b"]);
    r.setHealthy("c", false);
    expect([1, 2, 3].map(() => r.route({ programId: "p" }).backend)).toEqual(["a", "b", "a"]);
  });

  it("is deterministic: the same calls give the same decisions", () => {
    const run = (): string[] => {
      const r = router([
        { scorer: createPrefixAffinityScorer(), weight: 3 },
        { scorer: createLeastLoadScorer(), weight: 2 },
        { scorer: createKvUsageScorer(), weight: 1 },
      ]);
      const rng = new Rng(42);
      const open: number[] = [];
      const got: string[] = [];
      for (let k = 0; k < 200; k++) {
        if (open.length > 0 && rng.float() < 0.4) {
          const id = open.splice(rng.int(0, open.length - 1), 1)[0] as number;
          r.onFinished(id, { outputTokens: seq(rng.int(0, 50), rng.int(0, 8)) });
        }
        const d = r.route({ programId: `p${rng.int(0, 9)}`, promptTokens: [rng.int(0, 3), ...seq(0, rng.int(0, 30))] });
        open.push(d.id);
        got.push(d.backend);
      }
      return got;
    };
    const a = run();
    expect(run()).toEqual(a);
    expect(new Set(a).size).toBeGreaterThan(1);
  });

  it("rejects calls no backend can take, naming the filter", () => {
    const r = router([{ scorer: createLeastLoadScorer(), weight: 1 }]);
    r.updateMetrics("a", { kvCapacityTokens: 100 });
    r.setHealthy("b", false);
    r.setHealthy("c", false);
    expect(r.route({ programId: "p", estimatedPromptTokens: 50 }).backend).toBe("a");
    expect(() => r.route({ programId: "p", estimatedPromptTokens: 500 })).toThrow(
      "routing: filter 'capacity' left no backend for program 'p' (candidates: a)",
    );
    r.setHealthy("a", false);
    expect(() => r.route({ programId: "p" })).toThrow("filter 'healthy' left no backend");
  });

  it("forgets a backend's tree when it goes down", () => {
    const r = router([{ scorer: createLeastLoadScorer(), weight: 1 }]);
    r.route({ programId: "p", promptTokens: seq(0, 10) });
    r.setHealthy("a", false);
    r.setHealthy("a", true);
    expect(r.views()[0]?.treeTokens).toBe(0);
  });

  it("bounds program bindings and in-flight calls", () => {
    const r = router([{ scorer: createLeastLoadScorer(), weight: 1 }], { maxPrograms: 2, maxInFlight: 3 });
    for (const p of ["p1", "p2", "p3"]) r.route({ programId: p });
    expect(r.boundBackend("p1")).toBeUndefined();
    expect(r.boundBackend("p3")).toBe("c");
    expect(r.views().reduce((n, v) => n + v.programs, 0)).toBe(2);
    expect(() => r.route({ programId: "p4" })).toThrow("router in-flight table is full (limit 3)");
  });

  it("checks its inputs and its plugins' answers", () => {
    const ll = [{ scorer: createLeastLoadScorer(), weight: 1 }];
    expect(() => new PluginRouter({ backends: [], filters: [], scorers: ll })).toThrow("needs at least one backend");
    expect(() => new PluginRouter({ backends: ["a", "a"], filters: [], scorers: ll })).toThrow("backend name 'a' is used twice");
    expect(() => new PluginRouter({ backends: ["a"], filters: [], scorers: [] })).toThrow("needs at least one scorer");
    expect(() => new PluginRouter({ backends: ["a"], filters: [], scorers: [{ scorer: createLeastLoadScorer(), weight: 0 }] })).toThrow(
      "scorers[least-load].weight: must be a finite number > 0, got 0",
    );
    const r = router(ll);
    expect(() => r.route({ programId: "" })).toThrow("programId must be a non-empty string");
    expect(() => r.route({ programId: "p", estimatedPromptTokens: -1 })).toThrow("estimatedPromptTokens must be an integer >= 0");
    expect(() => r.updateMetrics("a", { kvUsage: 1.2 })).toThrow("routing metrics for 'a': kvUsage must be within 0..1, got 1.2");
    expect(() => r.updateMetrics("zz", {})).toThrow("unknown backend 'zz' (known: a, b, c)");
    expect(() => r.setQueued("a", -1)).toThrow("queued for 'a': must be an integer >= 0");
    const bad: RoutingScorer = { name: "bad", score: (ctx) => ctx.backends.map(() => 2) };
    expect(() => router([{ scorer: bad, weight: 1 }]).route({ programId: "p" })).toThrow("scorer 'bad' returned score 2 outside [0, 1]");
    const short: RoutingScorer = { name: "short", score: () => [1] };
    expect(() => router([{ scorer: short, weight: 1 }]).route({ programId: "p" })).toThrow("returned 1 scores for 3 backends");
  });
});
