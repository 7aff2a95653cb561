import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { realClock } from "../../core/real-clock.js";
import type { TokenBackend } from "../backend.js";
import type { EngineWeightLoader } from "./engine-weights.js";
import { SyncedBackend } from "./synced-backend.js";
import { registerWeightMetrics } from "./weight-metrics.js";

const loader = (fail: boolean): EngineWeightLoader => ({
  kind: "scripted",
  format: "gguf",
  prepare: async (m) => m,
  load: async () => {
    if (fail) throw new Error("refused");
  },
  servedVersion: async () => null,
});
const synced = (name: string, fail: boolean) =>
  new SyncedBackend({ makeBackend: () => ({ name, url: `http://${name}/v1` }) as TokenBackend, loader: loader(fail), inFlight: "finish", clock: realClock });

describe("registerWeightMetrics", () => {
  it("reports each external engine's served version and whether it left the rotation", async () => {
    const ok = synced("ok", false);
    const bad = synced("bad", true);
    const registry = new Registry();
    registerWeightMetrics(registry, [ok, bad]);
    await ok.switchTo("/v3", 3);
    await bad.switchTo("/v3", 3).catch(() => {});
    const text = await registry.metrics();
    expect(text).toContain('arbor_backend_policy_version{backend="ok"} 3');
    expect(text).toContain('arbor_backend_policy_version{backend="bad"} 0');
    expect(text).toContain('arbor_backend_weights_retired{backend="ok"} 0');
    expect(text).toContain('arbor_backend_weights_retired{backend="bad"} 1');
  });
});
