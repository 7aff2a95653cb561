import { describe, expect, it } from "vitest";
import { clusterEngine, parseClusterConfig } from "./cluster-config.js";

const base = {
  name: "c",
  store: { kind: "postgres", url: "postgres://postgres@db:5432/arbor", schema: "arbor" },
  engines: [{ name: "e0", host: "0.0.0.0", port: 8101, sequences: 4 }],
  backends: [
    { name: "e0", type: "builtin", url: "http://e0:8101/v1" },
    { name: "v0", type: "vllm", url: "http://vllm:8000/v1" },
  ],
  gateway: { host: "0.0.0.0", port: 8100, routing: "sticky-program" },
};

describe("cluster config", () => {
  it("parses a deployment with the run config's engine, backend and gateway defaults", () => {
    const c = parseClusterConfig(base);
    expect(c.engines[0]).toMatchObject({ name: "e0", host: "0.0.0.0", port: 8101, sequences: 4, executor: "llamacpp-scheduled", servedModelName: "arbor-tiny" });
    expect(c.gateway).toMatchObject({ host: "0.0.0.0", port: 8100, routing: "sticky-program", callTimeoutMs: 120_000 });
    expect(clusterEngine(c, "e0").port).toBe(8101);
    expect(() => clusterEngine(c, "e9")).toThrow("engine 'e9' is not in the cluster file (engines: e0)");
  });

  it.each([
    [{ store: { kind: "sqlite" } }, /store\.kind: sqlite cannot be shared across hosts/],
    [{ store: { kind: "postgres" } }, /store\.url: required for the postgres store/],
    [{ store: undefined }, /store: /],
    [{ backends: [{ name: "e0", type: "builtin" }] }, /backends\[0\]\.url: required in a cluster file/],
    [{ backends: [] }, /backends: need at least one backend/],
    [{ engines: [{ name: "e0", port: 1 }, { name: "e0", port: 2 }] }, /engines\[1\]\.name: 'e0' is named twice/],
    [{ engines: [{ name: "e0", hots: "x" }] }, /engines\[0\]: unknown key "hots" \(did you mean "host"\?\)/],
    [{ gateway: { port: 99999 } }, /gateway\.port: /],
  ])("refuses %j naming the field", (patch, message) => {
    expect(() => parseClusterConfig({ ...base, ...patch })).toThrow(message);
  });
});
