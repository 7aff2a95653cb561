// Tests of `arbor bench sim`'s table: the simulated rate beside the 1M/s target, per wall and per CPU second.
import { describe, expect, it } from "vitest";
import { SIM_SPEED_TARGETS, runSimSpeed } from "./sim-bench.js";

describe("runSimSpeed", () => {
  it("reports simulated tokens per wall and per CPU second beside the target, extrapolating below full scale", async () => {
    const lines: string[] = [];
    const t = await runSimSpeed(["seer"], 0.001, (l) => lines.push(l));
    expect(lines).toEqual(["sim: seer-moonlight under seer at scale 0.001"]);
    const col = (name: string): number => {
      const i = t.columns.indexOf(name);
      expect(i, name).toBeGreaterThanOrEqual(0);
      return i;
    };
    const row = t.rows[0] as (string | number)[];
    const tokens = row[col("output tokens")] as number;
    expect(tokens).toBeGreaterThan(0);
    const wall = row[col("wall (s)")] as number;
    const cpu = row[col("CPU (s)")] as number;
    expect(row[col("sim tokens / wall s")]).toBeCloseTo(tokens / wall, 6);
    expect(row[col("of 1M/s target")]).toBeCloseTo(tokens / wall / SIM_SPEED_TARGETS.tokensPerWallS, 9);
    expect(row[col("sim tokens / CPU s")]).toBeCloseTo(tokens / cpu, 6);
    expect(row[col("how")]).toBe("extrapolated");
    expect(row[col("target (s)")]).toBe(120);
    // Extrapolated: the full scale's requests × Table 3's mean, at the measured wall rate.
    expect(row[col("full iteration wall (s)")]).toBeCloseTo((3200 * 22386) / (tokens / wall), 3);
  });
});
