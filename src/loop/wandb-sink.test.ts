// The W&B sink against a stand-in built from what the official clients send: the run upserted with its config
// (default entity from the Viewer query), history rows at consecutive offsets with _step/_runtime/_timestamp,
// the summary, completion with the exit code, retries after 503s, failures counted, a missing key refused.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { realClock } from "../core/real-clock.js";
import { startFakeWandb, type FakeWandb } from "../testing/fake-wandb.js";
import { WandbSink, wandbRunId } from "./wandb-sink.js";

let wandb: FakeWandb;
const lines: string[] = [];
const start = (o: Partial<Parameters<typeof WandbSink.start>[0]> = {}) =>
  WandbSink.start({ baseUrl: wandb.url, project: "arbor-test", runId: "calc-2026-12-02T12:00:00.000Z", displayName: "calc", clock: realClock, log: (l) => lines.push(l), env: { WANDB_API_KEY: wandb.apiKey }, ...o });

beforeEach(async () => {
  wandb = await startFakeWandb();
  lines.length = 0;
});
afterEach(() => wandb.close());

describe("WandbSink", () => {
  it("upserts the run with its config, streams history rows and the summary, completes with exit code 0", async () => {
    expect(wandbRunId("calc-2026-12-02T12:00:00.000Z")).toBe("calc-2026-12-02T12-00-00-000Z");
    const sink = await start({ config: { "train.lr": 0.001, name: "calc" } });
    expect(sink.path).toEqual({ entity: "arbor-user", project: "arbor-test", run: "calc-2026-12-02T12-00-00-000Z" });
    const run = wandb.runs.get("arbor-user/arbor-test/calc-2026-12-02T12-00-00-000Z")!;
    expect(run.config).toEqual({ "train.lr": { value: 0.001, desc: null }, name: { value: "calc", desc: null } });
    sink.log(1, { "reward/mean": 0.25, "train/loss": Number.NaN }, realClock.now());
    sink.log(2, { "reward/mean": 0.5, "train/loss": -0.1 }, realClock.now());
    expect(await sink.finish("FINISHED")).toEqual({ dropped: 0, failed: 0 });
    expect(run.history.map((h) => [h._step, h["reward/mean"], h["train/loss"]])).toEqual([
      [1, 0.25, undefined],
      [2, 0.5, -0.1],
    ]);
    for (const h of run.history) {
      expect(typeof h._runtime).toBe("number");
      expect(typeof h._timestamp).toBe("number");
    }
    expect(run.summary).toEqual({ "reward/mean": 0.5, "train/loss": -0.1 });
    expect(run.complete).toEqual({ exitcode: 0 });
    expect(lines[0]).toBe(`tracking wandb: run arbor-user/arbor-test/calc-2026-12-02T12-00-00-000Z at ${wandb.url}`);
  });

  it("retries after 503s, counts what still fails, marks a failed run with exit code 1", async () => {
    const sink = await start({ entity: "team", attempts: 3 });
    wandb.failNext(2);
    sink.log(1, { a: 1 }, realClock.now());
    await sink.finish("FINISHED");
    expect(wandb.runs.get("team/arbor-test/calc-2026-12-02T12-00-00-000Z")!.history).toHaveLength(1);

    const down = await start({ entity: "team", runId: "other", attempts: 2 });
    wandb.failNext(2);
    down.log(1, { a: 1 }, realClock.now());
    expect(await down.finish("FAILED")).toEqual({ dropped: 0, failed: 1 });
    expect(wandb.runs.get("team/arbor-test/other")!.complete).toEqual({ exitcode: 1 });
    expect(lines.some((l) => /1 history row\(s\) not accepted/.test(l))).toBe(true);
  });

  it("refuses a missing key or a key the server rejects, naming what to set", async () => {
    await expect(start({ env: {} })).rejects.toThrow(/tracking\.wandb: set WANDB_API_KEY/);
    await expect(start({ env: { WANDB_API_KEY: "wrong" } })).rejects.toThrow(/W&B \/graphql: 401/);
  });
});
