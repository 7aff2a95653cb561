// A backend `type: disagg` in the run config and the cluster file: its fields checked with errors naming
// the field, and createBackend building one backend over the listed engines (no engine needed: the
// adapters are made, not called).
import { describe, expect, it } from "vitest";
import { parseClusterConfig } from "../core/cluster-config.js";
import { parseRunConfig, type BackendConfig } from "../core/config.js";
import { createBackend } from "./registry.js";

const pd = { name: "pd", type: "disagg", prefill: ["http://p0:8101/v1"], decode: ["http://d0:8102/v1"] };
const cluster = {
  name: "c",
  store: { kind: "postgres", url: "postgres://postgres@db:5432/arbor" },
  engines: [
    { name: "p0", port: 8101, role: "prefill", kvPool: { url: "redis://redis:6379" } },
    { name: "d0", port: 8102, role: "decode", kvPool: { url: "redis://redis:6379" } },
  ],
  backends: [pd],
};

describe("backend type: disagg in the config", () => {
  it("parses in a cluster file without a url of its own, and in a run config", () => {
    const c = parseClusterConfig({ ...cluster, backends: [{ ...pd, mixed: ["http://m0:8103/v1"], cost: { queueMsPerRequest: 10 } }] });
    expect(c.backends[0]).toMatchObject({ name: "pd", type: "disagg", prefill: ["http://p0:8101/v1"], decode: ["http://d0:8102/v1"], mixed: ["http://m0:8103/v1"] });
    expect(c.backends[0]!.cost).toEqual({ queueMsPerRequest: 10, transferBytesPerMs: 1_000_000, transferLatencyMs: 2, kvBytesPerToken: 32 * 1024 });
    expect(parseRunConfig({ backends: [pd] }).backends[0]!.type).toBe("disagg");
  });

  it.each([
    [{ prefill: [] }, /backends\[0\]\.prefill: needs at least one engine with role prefill/],
    [{ decode: [] }, /backends\[0\]\.decode: needs at least one engine with role decode/],
    [{ prefill: undefined }, /backends\[0\]\.prefill: required with type: disagg/],
    [{ decode: undefined }, /backends\[0\]\.decode: required with type: disagg/],
    [{ decode: ["d0:8102"] }, /backends\[0\]\.decode\[0\]: must be an engine's base URL/],
    [{ mixed: ["not a url"] }, /backends\[0\]\.mixed\[0\]: must be an engine's base URL/],
    [{ url: "http://p0:8101/v1" }, /backends\[0\]\.url: not used with type: disagg/],
    [{ decode: ["http://p0:8101/v1"] }, /backends\[0\]\.prefill: http:\/\/p0:8101\/v1 is listed twice/],
    [{ cost: { transferBytesPerMs: 0 } }, /backends\[0\]\.cost\.transferBytesPerMs: /],
    [{ cost: { queueMs: 1 } }, /backends\[0\]\.cost: unknown key "queueMs"/],
    [{ weightSync: { kind: "sglang" } }, /backends\[0\]\.weightSync: not supported with type: disagg/],
  ])("refuses %j naming the field", (patch, message) => {
    expect(() => parseClusterConfig({ ...cluster, backends: [{ ...pd, ...patch }] })).toThrow(message);
  });

  it("refuses the disagg fields on other types", () => {
    expect(() => parseRunConfig({ backends: [{ name: "v", type: "vllm", url: "http://v:8000/v1", prefill: ["http://p0:8101/v1"] }] })).toThrow(/backends\[0\]\.prefill: only used with type: disagg/);
  });

  it("refuses a run that trains over it, and a name shared with an in-process engine", () => {
    expect(() => parseRunConfig({ backends: [pd], train: {} })).toThrow(/backends\[0\]\.type: backend 'pd': type: disagg cannot follow training's policy versions yet/);
    expect(() => parseRunConfig({ engines: [{ name: "pd" }], backends: [pd] })).toThrow(/backends\[0\]\.name: backend 'pd' \(type: disagg\) reaches its engines by URL/);
  });

  it("builds one token backend over the listed engines, with Arbor's parser by default", () => {
    const b = createBackend(parseRunConfig({ backends: [{ ...pd, model: "calc" }] }).backends[0] as BackendConfig);
    expect(b).toMatchObject({ name: "pd", type: "disagg", url: "http://p0:8101/v1", servedModel: "calc", capabilities: { tokenIds: true, logprobs: true } });
    expect(b.toolParser?.name).toBe("arbor");
    expect(typeof b.generate).toBe("function");
    const hermes = createBackend({ ...pd, type: "disagg", toolParser: "hermes" } as BackendConfig);
    expect(hermes.toolParser?.name).toBe("hermes");
    // A config built in code (not through the schema) gets the same words.
    expect(() => createBackend({ name: "pd", type: "disagg", prefill: ["http://p0:8101/v1"] } as BackendConfig)).toThrow("backend 'pd' decode: type: disagg needs at least one engine with role decode");
  });
});
