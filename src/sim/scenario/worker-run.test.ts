// Tests of running a system in a worker thread: the same result as in this thread, errors carried back.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir, totalmem } from "node:os";
import { getHeapStatistics } from "node:v8";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArborError } from "../../core/errors.js";
import { writeTinyRolloutWorkload } from "../../testing/tiny-rollout-workload.js";
import { getScenario } from "./registry.js";
import { runSystemInWorker, workerHeapMb } from "./worker-run.js";

let dir: string;
let file: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-worker-run-"));
  file = await writeTinyRolloutWorkload(dir);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("runSystemInWorker", () => {
  it("gives the result of an in-process run, byte for byte", async () => {
    const here = await (await getScenario(file)).run("seer", { seed: 3, scale: 1 });
    const there = await runSystemInWorker(file, "seer", { seed: 3, scale: 1 });
    expect(JSON.stringify(there.result)).toBe(JSON.stringify(here));
    expect(there.wallMs).toBeGreaterThan(0);
    expect(there.cpuMs).toBeGreaterThan(0);
  });

  it("carries the run's progress back, the last of it all done, the result unchanged", async () => {
    const seen: [number, number][] = [];
    const plain = await runSystemInWorker(file, "seer", { seed: 3, scale: 1 });
    const told = await runSystemInWorker(file, "seer", { seed: 3, scale: 1, onAdvance: (done, total) => seen.push([done, total]) });
    expect(JSON.stringify(told.result)).toBe(JSON.stringify(plain.result));
    const requests = told.result.summary.requests;
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.at(-1)).toEqual([requests, requests]);
    // In order (the thread sends at most one per 200 ms of its wall time, and the last one always).
    expect(seen.map((x) => x[0])).toEqual([...seen.map((x) => x[0])].sort((a, b) => a - b));
  });

  it("carries an ArborError back with its code, and stops on abort", async () => {
    const e = await runSystemInWorker(file, "no-such-system", { seed: 3, scale: 1 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ArborError);
    expect((e as ArborError).code).toBe("config");
    expect((e as Error).message).toMatch(/no-such-system/);
    const stop = new AbortController();
    const run = runSystemInWorker(file, "seer", { seed: 3, scale: 1 }, stop.signal);
    stop.abort();
    await expect(run).rejects.toThrow(/system seer: aborted/);
    await expect(runSystemInWorker(file, "seer", { seed: 3, scale: 1 }, stop.signal)).rejects.toThrow(/aborted/);
  });

  it("gives each of N threads an equal share of three quarters of the memory, never less than this thread's limit", () => {
    const own = Math.floor(getHeapStatistics().heap_size_limit / 2 ** 20);
    const share = (jobs: number): number => Math.floor((0.75 * totalmem()) / 2 ** 20 / jobs);
    for (const jobs of [1, 2, 3, 64]) expect(workerHeapMb(jobs)).toBe(Math.max(own, share(jobs)));
    expect(workerHeapMb(64)).toBeGreaterThanOrEqual(own);
  });
});
