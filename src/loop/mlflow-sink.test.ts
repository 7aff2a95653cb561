// The MLflow sink against a stand-in built from MLflow's REST handlers: the experiment found or created, the
// run created with its params and tags, metrics posted in batches within MLflow's limits, retries after 503s,
// failures counted without stopping anything, credentials from MLflow's variables, and the run's final status.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { realClock } from "../core/real-clock.js";
import { startFakeMlflow, type FakeMlflow } from "../testing/fake-mlflow.js";
import { flattenParams, MlflowSink } from "./mlflow-sink.js";

let mlflow: FakeMlflow;
const lines: string[] = [];
const start = (o: Partial<Parameters<typeof MlflowSink.start>[0]> = {}) =>
  MlflowSink.start({ url: mlflow.url, experiment: "arbor-test", runName: "calc-1", clock: realClock, log: (l) => lines.push(l), env: {}, ...o });

beforeEach(async () => {
  mlflow = await startFakeMlflow();
  lines.length = 0;
});
afterEach(() => mlflow.close());

describe("MlflowSink", () => {
  it("creates the experiment once, a run with its params and tags, posts every metric and marks the run FINISHED", async () => {
    const params = flattenParams({ name: "calc", train: { lr: 0.001, estimator: "grpo" }, engines: [{ name: "e0" }], long: "x".repeat(7000) });
    expect(params).toMatchObject({ name: "calc", "train.lr": "0.001", "train.estimator": "grpo", engines: '[{"name":"e0"}]' });
    const sink = await start({ params, tags: { "arbor.run_id": "calc-1" } });
    const run = mlflow.runs.get(sink.runId)!;
    expect(run).toMatchObject({ runName: "calc-1", experimentId: "1", status: "RUNNING", tags: { "mlflow.runName": "calc-1", "arbor.run_id": "calc-1" } });
    expect(run.params["train.lr"]).toBe("0.001");
    expect(run.params.long).toHaveLength(6000); // cut to MLflow's limit
    sink.log(1, { "reward/mean": 0.5, "train/loss": -0.2, "train/kl": Number.NaN }, 1000);
    // 1,200 metrics in one step: two log-batch requests (at most 1000 each).
    sink.log(2, Object.fromEntries(Array.from({ length: 1200 }, (_, i) => [`m/${i}`, i])), 2000);
    expect(await sink.finish("FINISHED")).toEqual({ dropped: 0, failed: 0 });
    expect(run.metrics).toHaveLength(2 + 1200); // NaN left out
    expect(run.metrics[0]).toEqual({ key: "reward/mean", value: 0.5, timestamp: 1000, step: 1 });
    expect(run.status).toBe("FINISHED");
    expect(run.endTime).toBeGreaterThan(0);
    expect(lines[0]).toMatch(/^tracking mlflow: run run1\S* in experiment 'arbor-test' \(1\) at http/);
    // A second run finds the experiment by name.
    const again = await start({ runName: "calc-2" });
    expect(mlflow.experiments.size).toBe(1);
    expect(mlflow.runs.get(again.runId)?.experimentId).toBe("1");
  });

  it("retries after 503s, counts what still fails without throwing, and is bounded", async () => {
    const sink = await start({ attempts: 3, maxQueued: 5 });
    mlflow.failNext(2);
    sink.log(1, { a: 1 }, 1);
    await sink.finish("FINISHED");
    expect(mlflow.runs.get(sink.runId)!.metrics.map((m) => m.key)).toEqual(["a"]);

    const down = await start({ attempts: 2, maxQueued: 5 });
    mlflow.failNext(1000);
    down.log(1, Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`k${i}`, i])), 1);
    const r = await down.finish("FAILED");
    // 8 queued past a bound of 5: 3 dropped; the 5 posted failed twice each.
    expect(r).toEqual({ dropped: 3, failed: 5 });
    expect(lines.some((l) => /5 metric\(s\) not accepted, 3 dropped from a full queue/.test(l))).toBe(true);
    expect(lines.some((l) => /could not mark run \S+ FAILED/.test(l))).toBe(true);
  });

  it("sends MLflow's credentials and refuses a bad URL or an unreachable server clearly", async () => {
    await start({ env: { MLFLOW_TRACKING_TOKEN: "tok" } });
    expect(mlflow.requests.at(-1)?.authorization).toBe("Bearer tok");
    await start({ env: { MLFLOW_TRACKING_USERNAME: "u", MLFLOW_TRACKING_PASSWORD: "p" } });
    expect(mlflow.requests.at(-1)?.authorization).toBe(`Basic ${Buffer.from("u:p").toString("base64")}`);
    await expect(start({ url: "ftp://x" })).rejects.toThrow(/tracking\.mlflow\.url: must be an http\(s\) URL, got 'ftp:\/\/x'/);
    await mlflow.close();
    await expect(start({ attempts: 1 })).rejects.toThrow(/MLflow GET experiments\/get-by-name: failed 1 times/);
    mlflow = await startFakeMlflow();
  });
});
