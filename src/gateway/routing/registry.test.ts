import { describe, expect, it } from "vitest";
import { createPluginRouter, createRoutingFilter, createRoutingScorer, routingFilterNames, routingScorerNames } from "./registry.js";

describe("routing plugin registry", () => {
  it("knows every plugin by name", () => {
    expect(routingFilterNames).toEqual(["healthy", "capacity"]);
    expect(routingScorerNames).toEqual(["least-load", "kv-usage", "sticky-program", "prefix-affinity", "cost-aware"]);
    for (const n of routingScorerNames) expect(createRoutingScorer(n).name).toBe(n);
    for (const n of routingFilterNames) expect(createRoutingFilter(n).name).toBe(n);
  });

  it("lists the known names for an unknown one", () => {
    expect(() => createRoutingScorer("random")).toThrow(
      "gateway.routing.scorers: unknown scorer 'random' (known: least-load, kv-usage, sticky-program, prefix-affinity, cost-aware)",
    );
    expect(() => createRoutingFilter("toString")).toThrow("unknown filter 'toString' (known: healthy, capacity)");
    expect(() => createPluginRouter(["a"], { scorers: [{ name: "least-load" }, { name: "prefix", weight: 2 }] })).toThrow(
      "gateway.routing.scorers[1]: unknown scorer 'prefix' (known: ",
    );
  });

  it("names the field and reason of bad options and config", () => {
    expect(() => createRoutingScorer("prefix-affinity", { cacheThreshold: 3 })).toThrow(
      "gateway.routing.scorers (prefix-affinity).options.cacheThreshold:",
    );
    expect(() => createRoutingScorer("least-load", { weight: 2 })).toThrow("gateway.routing.scorers (least-load).options");
    expect(() => createPluginRouter(["a"], { scorers: [{ name: "least-load", weight: -1 }] })).toThrow("gateway.routing.scorers[0].weight:");
    expect(() => createPluginRouter(["a"], { scorers: [] })).toThrow("gateway.routing.scorers:");
    expect(() => createPluginRouter(["a"], { filters: [{ name: "capacity", options: { maxKvUsage: 0 } }] })).toThrow(
      "gateway.routing.filters[0] (capacity).options.maxKvUsage:",
    );
  });

  it("builds a router from config with weights and options", () => {
    const r = createPluginRouter(["a", "b"], {
      filters: ["healthy"],
      scorers: [
        { name: "cost-aware", weight: 3, options: { prefillLoadScale: 2, blockSize: 4 } },
        { name: "least-load", weight: 1 },
      ],
      prefixTreeMaxTokens: 64,
    });
    const d = r.route({ programId: "p", promptTokens: [1, 2, 3, 4, 5, 6, 7, 8] });
    r.onFinished(d.id, { outputTokens: [9, 9, 9, 9] });
    // Cache on d.backend: 12 of the next 16 tokens; cost-aware (weight 3) outweighs least-load.
    const e = r.route({ programId: "q", promptTokens: [1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9, 0, 0, 0, 0] });
    expect(e.backend).toBe(d.backend);
    // Defaults: healthy + capacity filters, least-load alone.
    const def = createPluginRouter(["x", "y"]);
    expect([def.route({ programId: "p" }).backend, def.route({ programId: "q" }).backend]).toEqual(["x", "y"]);
  });
});
