import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { writeTinyRolloutWorkload } from "../testing/tiny-rollout-workload.js";
import { arbor } from "../testing/validate-cli.js";
import { formatSeedList, MAX_SEEDS, parseSeedList, seedSummaryTable, simSeedsCommand } from "./sim-seeds.js";
import { simCommand } from "./sim.js";

describe("parseSeedList", () => {
  it("reads integers and inclusive ranges in the order given", () => {
    expect(parseSeedList("3")).toEqual([3]);
    expect(parseSeedList("1-5")).toEqual([1, 2, 3, 4, 5]);
    expect(parseSeedList("9, 1-3,0")).toEqual([9, 1, 2, 3, 0]);
  });

  it("writes a list back with runs of consecutive seeds as ranges, which it reads again", () => {
    expect(formatSeedList([1, 2, 3, 7])).toBe("1-3,7");
    expect(formatSeedList([9, 1, 2, 0])).toBe("9,1-2,0");
    expect(formatSeedList([4])).toBe("4");
    expect(parseSeedList(formatSeedList([5, 6, 8, 9, 10]))).toEqual([5, 6, 8, 9, 10]);
  });

  it("refuses what is not a seed list, naming --seeds and the reason", () => {
    expect(() => parseSeedList("1,x")).toThrow(/--seeds: 'x' is not a seed/);
    expect(() => parseSeedList("-1")).toThrow(/--seeds: '-1' is not a seed/);
    expect(() => parseSeedList("1.5")).toThrow(/is not a seed/);
    expect(() => parseSeedList("")).toThrow(/is not a seed/);
    expect(() => parseSeedList("5-2")).toThrow(/--seeds: the range 5-2 ends before it starts/);
    expect(() => parseSeedList("1-3,2")).toThrow(/--seeds: seed 2 is named twice/);
    expect(parseSeedList(`1-${MAX_SEEDS}`)).toHaveLength(MAX_SEEDS);
    expect(() => parseSeedList(`0-${MAX_SEEDS}`)).toThrow(new RegExp(`--seeds: at most ${MAX_SEEDS} seeds`));
  });
});

describe("arbor sim --seeds", () => {
  it("writes each seed's report as --seed would, the summary to seeds.json, and prints the table over the seeds", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-sim-seeds-"));
    const file = await writeTinyRolloutWorkload(dir);
    const out = vi.spyOn(console, "log").mockImplementation(() => {});
    const err = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const summary = await simSeedsCommand(file, { systems: "verl-like,seer,arbor", seeds: [2, 3], scale: 1, out: join(dir, "seeds") });
      expect(JSON.parse(await readFile(join(dir, "seeds", "seeds.json"), "utf8"))).toEqual(summary);
      const single = await simCommand(file, { systems: "verl-like,seer,arbor", seed: 3, scale: 1, out: join(dir, "one") });
      expect(await readFile(join(dir, "seeds", "seed-3", "report.json"), "utf8")).toBe(await readFile(join(dir, "one", "report.json"), "utf8"));
      expect(summary.systems[1]?.iterationMs.values[1]).toBe(single.systems[1]?.summary.iterationMs);
      const printed = out.mock.calls.flat().join("\n");
      expect(printed).toContain("arbor sim tiny over seeds 2, 3 (scale 1): ratios against verl-like");
      expect(printed).toMatch(/arbor over the best other system \(iteration time\), per seed: \d\.\d{3}×, \d\.\d{3}×; mean/);
      // The workload's targets (Seer's, on a rollout workload file), judged on the mean over the seeds.
      expect(printed).toMatch(/target: seer over verl-like, iteration time: \d+\.\d\d× \(\d+\.\d\d× … \d+\.\d\d×\), target ≥ 1\.44×: (met|missed) \([0-2] of 2 seeds meet it\)/);
      expect(printed).toContain("target: seer's share of the oracle (oracle time / seer time): not measured (run seer and oracle)");
      expect(err.mock.calls.flat().join("\n")).toMatch(/tiny: seed 3 \(2\/2\)/);
      const table = seedSummaryTable(summary);
      expect(table.rows.map((r) => r[0])).toEqual(["verl-like", "seer", "arbor"]);
      expect(table.rows[0]?.[6]).toBe(1);
      await expect(simSeedsCommand(file, { seeds: [4], systems: "seer,nope", scale: 1, out: join(dir, "x") })).rejects.toThrow(/no system 'nope'.*seed 4/);
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
  });

  it("the command refuses --seed beside --seeds, and a bad list, with one line naming the option", async () => {
    const both = await arbor(["sim", "search-agent", "--seed", "2", "--seeds", "1-3"]);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toMatch(/--seed and --seeds: give one of them/);
    const bad = await arbor(["sim", "search-agent", "--seeds", "3-1"]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/--seeds: the range 3-1 ends before it starts/);
    // --reproduction takes --seeds too, and refuses the same mistakes before running anything.
    const reproduction = await arbor(["sim", "--reproduction", "--seed", "1", "--seeds", "1-2"]);
    expect(reproduction.code).not.toBe(0);
    expect(reproduction.stderr).toMatch(/--seed and --seeds: give one of them/);
  });
});
