// Tests of runSim's lanes: systems run `jobs` at a time through the runner, the report keeps the systems'
// order whatever order they finish in, and the first failure stops the others.
import { describe, expect, it } from "vitest";
import { parseWorkload } from "./workload-file.js";
import { TINY_ROLLOUT_YAML } from "../../testing/tiny-rollout-workload.js";
import { runSim } from "./run-sim.js";
import type { SimRunOptions } from "./scenario.js";
import type { SimSystemResult } from "./sim-report.js";

const scenario = parseWorkload(TINY_ROLLOUT_YAML, "tiny.yaml");
const systems = ["verl-like", "seer", "oracle", "arbor"];

/** A runner that runs in this thread, finishing the systems in reverse order, and counts how many run at once. */
function reversingRunner(): { run: (s: string, o: SimRunOptions, signal: AbortSignal) => Promise<SimSystemResult>; maxAtOnce: () => number } {
  let running = 0;
  let most = 0;
  const run = async (s: string, o: SimRunOptions): Promise<SimSystemResult> => {
    running++;
    most = Math.max(most, running);
    const r = await scenario.run(s, o);
    // Later systems end sooner.
    await new Promise((resolve) => setTimeout(resolve, 40 * (systems.length - systems.indexOf(s))));
    running--;
    return r;
  };
  return { run, maxAtOnce: () => most };
}

describe("runSim lanes", () => {
  it("runs `jobs` systems at once through the runner and gives the report of one-at-a-time", async () => {
    const one = await runSim(scenario, { systems, seed: 5, scale: 1 });
    const runner = reversingRunner();
    const finished: string[] = [];
    const two = await runSim(scenario, { systems, seed: 5, scale: 1, jobs: 2, runSystem: runner.run, onProgress: (s, r) => r && finished.push(s) });
    expect(JSON.stringify(two)).toBe(JSON.stringify(one));
    expect(runner.maxAtOnce()).toBe(2);
    expect(finished).not.toEqual(systems);
  });

  it("states the scale it ran: engines and requests as the systems ran them, the workload's own at full scale", async () => {
    const full = await runSim(scenario, { systems: ["verl-like"], seed: 5, scale: 1 });
    expect(full.workload.scale).toEqual({ ...scenario.info.scale, runScale: 1 });
    const half = await runSim(scenario, { systems: ["verl-like"], seed: 5, scale: 0.5 });
    const ran = half.systems[0];
    expect(half.workload.scale).toMatchObject({ instances: 1, gpus: 1, promptsPerIteration: 4, requestsPerIteration: 16, groupSize: 4, runScale: 0.5 });
    expect(Object.keys(ran?.series.kvUsage ?? {})).toHaveLength(1);
    expect(ran?.summary.requests).toBe(16);
    expect(scenario.info.scale).toMatchObject({ instances: 2, requestsPerIteration: 32 });
  });

  it("one system, or jobs 1, runs in this thread without the runner", async () => {
    const never = (): Promise<SimSystemResult> => Promise.reject(new Error("the runner ran"));
    await expect(runSim(scenario, { systems: ["seer"], seed: 5, scale: 1, jobs: 4, runSystem: never })).resolves.toMatchObject({ baseline: "seer" });
    await expect(runSim(scenario, { systems: ["seer", "arbor"], seed: 5, scale: 1, jobs: 1, runSystem: never })).resolves.toMatchObject({ baseline: "seer" });
  });

  it("the first failure aborts the systems running and starts no other", async () => {
    const started: string[] = [];
    const aborted: string[] = [];
    const run = (s: string, _o: SimRunOptions, signal: AbortSignal): Promise<SimSystemResult> => {
      started.push(s);
      if (s === "seer") return Promise.reject(new Error("seer broke"));
      return new Promise((_resolve, reject) =>
        signal.addEventListener("abort", () => {
          aborted.push(s);
          reject(new Error(`${s} aborted`));
        }),
      );
    };
    await expect(runSim(scenario, { systems, seed: 5, scale: 1, jobs: 2, runSystem: run })).rejects.toThrow("seer broke");
    expect(started).toEqual(["verl-like", "seer"]);
    expect(aborted).toEqual(["verl-like"]);
  });

  it("refuses a scale outside (0, 1] or a seed that is not an integer before any system starts", async () => {
    const started: string[] = [];
    const runSystem = (s: string): Promise<SimSystemResult> => {
      started.push(s);
      return Promise.reject(new Error("a system started"));
    };
    for (const scale of [0, -1, 1.5, Number.NaN]) {
      await expect(runSim(scenario, { systems, seed: 5, scale, jobs: 2, runSystem, onProgress: (s) => started.push(s) })).rejects.toThrow(`sim: scale must be in (0, 1], got ${scale}`);
    }
    await expect(runSim(scenario, { systems, seed: 1.5, scale: 1, jobs: 2, runSystem })).rejects.toThrow("sim: seed must be an integer, got 1.5");
    expect(started).toEqual([]);
  });

  it("refuses a bad --jobs, and more than one without a runner", async () => {
    for (const jobs of [0, 1.5, 65]) await expect(runSim(scenario, { systems, seed: 5, scale: 1, jobs })).rejects.toThrow(/--jobs must be an integer from 1 to 64/);
    await expect(runSim(scenario, { systems, seed: 5, scale: 1, jobs: 2 })).rejects.toThrow(/needs a runner/);
  });
});
