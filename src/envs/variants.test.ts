import { describe, expect, it } from "vitest";
import { createEnvironment } from "./registry.js";
import { sampleVariant, type EnvVariant } from "./variants.js";

const V: EnvVariant[] = [
  { id: "a", kind: "variant", description: "a", weight: 2 },
  { id: "b", kind: "variant", description: "b" },
  { id: "p", kind: "perturbation", description: "p", weight: 0.5 },
];

describe("variant sampling", () => {
  it("same seed and program give the same variant; seeds and programs spread over all of them", () => {
    const ids = Array.from({ length: 300 }, (_, i) => `run/g${i >> 2}/s${i & 3}`);
    const first = ids.map((id) => sampleVariant(V, 7, id)?.id);
    expect(ids.map((id) => sampleVariant(V, 7, id)?.id)).toEqual(first);
    expect(ids.map((id) => sampleVariant(V, 8, id)?.id)).not.toEqual(first);
    const counts = Object.fromEntries(V.map((v) => [v.id, first.filter((x) => x === v.id).length]));
    // Weights 2 : 1 : 0.5 of 300 draws: about 171, 86, 43.
    expect(counts.a).toBeGreaterThan(130);
    expect(counts.b).toBeGreaterThan(55);
    expect(counts.p).toBeGreaterThan(20);
    expect(counts.p).toBeLessThan(70);
  });

  it("is undefined without variants and rejects bad weights", () => {
    expect(sampleVariant([], 1, "x")).toBeUndefined();
    expect(() => sampleVariant([{ id: "z", kind: "variant", description: "", weight: -1 }], 1, "x")).toThrow(/variant 'z': weight must be/);
  });

  it("swe-mini and search-qa declare variants and perturbations", () => {
    for (const name of ["swe-mini", "search-qa"]) {
      const vs = createEnvironment(name).variants?.() ?? [];
      expect(vs.some((v) => v.kind === "variant")).toBe(true);
      expect(vs.some((v) => v.kind === "perturbation")).toBe(true);
      expect(new Set(vs.map((v) => v.id)).size).toBe(vs.length);
    }
    const swe = createEnvironment("swe-mini").variants?.() ?? [];
    expect(swe.find((v) => v.id === "registry-unreachable")?.env).toEqual({ npm_config_registry: "http://127.0.0.1:9/" });
    expect(swe.find((v) => v.id === "dev-dependency-removed")?.remove).toEqual(["repo/node_modules/mini-expect"]);
  });
});
