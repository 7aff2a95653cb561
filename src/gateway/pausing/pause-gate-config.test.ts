import { describe, expect, it } from "vitest";
import { parseRunConfig } from "../../core/config.js";
import type { PauseGateConfig } from "./pause-gate.js";

/** The smallest valid run config, with `gateway` added. */
const parse = (gateway: object = {}) => parseRunConfig({ engines: [{ name: "e0" }], gateway });

describe("gateway.pausing run config", () => {
  it("is off by default with ThunderAgent's defaults, and feeds PauseGate as is", () => {
    const p = parse().gateway.pausing;
    expect(p).toEqual({
      enabled: false,
      lambdaMax: 1,
      lambdaMin: 1,
      tickMs: 5000,
      forceResumeMs: 1_800_000,
      maxHeldCalls: 10_000,
      restorePacking: "most-free",
      bufferPerProgram: 100,
    });
    // The parsed section is a PauseGateConfig (checked by tsc).
    const forGate: PauseGateConfig = p;
    expect(forGate.tickMs).toBe(5000);
  });

  it("names the bad field", () => {
    expect(() => parse({ pausing: { lambdaMin: 0.9, lambdaMax: 0.8 } })).toThrow(/gateway\.pausing\.lambdaMin/);
    expect(() => parse({ pausing: { restorePacking: "first-fit" } })).toThrow(/gateway\.pausing\.restorePacking/);
    expect(() => parse({ pausing: { tickMs: 0 } })).toThrow(/gateway\.pausing\.tickMs/);
    expect(() => parse({ pausing: { capacities: { e0: -5 } } })).toThrow(/gateway\.pausing\.capacities\.e0/);
    expect(parse({ pausing: { enabled: true, capacities: { e0: 4096 } } }).gateway.pausing).toMatchObject({ enabled: true, capacities: { e0: 4096 } });
    expect(parse({ pausing: { restorePacking: "origin" } }).gateway.pausing.restorePacking).toBe("origin");
  });
});
