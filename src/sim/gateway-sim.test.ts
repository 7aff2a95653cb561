import { describe, expect, it } from "vitest";
import { runGatewaySim } from "./gateway-sim.js";
import { generateThunderWorkload } from "./thunder-workload.js";

const programs = generateThunderWorkload({
  programs: 6,
  turns: [3, 6],
  systemPromptTokens: 1000,
  taskTokens: 400,
  outputTokens: [50, 200],
  toolOutputTokens: [300, 1500],
  toolMedianMs: 1000,
  toolSigma: 1.2,
  toolMaxMs: 60_000,
  arrivalWindowMs: 1000,
  vocabSize: 128_256,
  minTokenId: 3,
  seed: 23,
});
const turns = programs.reduce((s, p) => s + p.turns.length, 0);

describe("gateway simulation over the production call path", () => {
  it("runs every call through the gateway's program table and releases every program there", async () => {
    for (const pausing of [false, true]) {
      const r = await runGatewaySim(programs, { engines: 2, kvTokensPerEngine: 16_384, routing: "prefix-affinity", pausing, seed: 3 });
      expect(r.turns).toBe(turns);
      expect(r.gatewayPrograms).toEqual({ active: 0, terminated: programs.length });
    }
  });

  it("holds calls at the production pause gate when KV is oversubscribed", async () => {
    const r = await runGatewaySim(programs, { engines: 1, kvTokensPerEngine: 8_192, routing: "least-load", pausing: { tickMs: 1000 }, seed: 3 });
    expect(r.turns).toBe(turns);
    expect(r.pauses).toBeGreaterThan(0);
    expect(r.restores).toBeGreaterThan(0);
    expect(r.heldMs).toBeGreaterThan(0);
  });

  it("runs waves one after another: a wave's programs arrive after the wave before it ended", async () => {
    const [a, b] = programs as [(typeof programs)[0], (typeof programs)[0]];
    const one = await runGatewaySim([a], { engines: 1, kvTokensPerEngine: 16_384, routing: "least-load", seed: 3 });
    const r = await runGatewaySim([a, { ...b, wave: 1, arrivalMs: 250 }], { engines: 1, kvTokensPerEngine: 16_384, routing: "least-load", seed: 3 });
    // b arrives 250 ms after a's end (its latency is its own run, not a wait for a).
    const [aEnd, bEnd] = r.programEndsMs as [number, number];
    expect(aEnd).toBe(one.makespanMs);
    expect(r.meanProgramLatencyMs).toBeCloseTo((aEnd - a.arrivalMs + (bEnd - aEnd - 250)) / 2, 6);
    await expect(runGatewaySim([{ ...a, wave: -1 }], { engines: 1, kvTokensPerEngine: 16_384, routing: "least-load", seed: 3 })).rejects.toThrow(/program .*: wave must be an integer >= 0, got -1/);
  });

  it("refuses a workload that uses one program id twice", async () => {
    await expect(runGatewaySim([programs[0]!, programs[0]!], { engines: 1, kvTokensPerEngine: 16_384, routing: "least-load", seed: 1 })).rejects.toThrow(/used twice/);
  });
});
