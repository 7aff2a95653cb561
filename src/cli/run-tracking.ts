// The experiment trackers a run reports to (config `tracking`): an MLflow run and a Weights & Biases run,
// each given the run config's settings as its params, beside metrics.jsonl and TensorBoard (loop/metrics-log.ts).
import type { Clock } from "../core/clock.js";
import type { RunConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import { flattenParams, MlflowSink } from "../loop/mlflow-sink.js";
import { WandbSink } from "../loop/wandb-sink.js";

/** The run's tracking sinks (config `tracking`): MLflow and W&B runs whose params/config are the run config's settings. */
export async function startTrackingSinks(cfg: RunConfig, runId: string, clock: Clock, log: (line: string) => void): Promise<(MlflowSink | WandbSink)[]> {
  const sinks: (MlflowSink | WandbSink)[] = [];
  const { mlflow, wandb } = cfg.tracking ?? {};
  if (mlflow) {
    const url = mlflow.url ?? process.env.MLFLOW_TRACKING_URI;
    if (!url) throw new ArborError("tracking.mlflow.url: set it, or MLFLOW_TRACKING_URI, to the tracking server's URL", "config");
    sinks.push(await named("tracking.mlflow", url, () => MlflowSink.start({ url, experiment: mlflow.experiment ?? cfg.name, runName: runId, params: flattenParams(cfg), tags: { "arbor.run_id": runId }, clock, log })));
  }
  if (wandb) {
    const options = { project: wandb.project, ...(wandb.entity ? { entity: wandb.entity } : {}), ...(wandb.baseUrl ? { baseUrl: wandb.baseUrl } : {}), runId, displayName: runId, config: flattenParams(cfg), clock, log };
    sinks.push(await named("tracking.wandb", WandbSink.baseUrl(options), () => WandbSink.start(options)));
  }
  return sinks;
}

/** A tracker's start whose failure names its config field and server ("MLflow GET …: failed 5 times" named neither). */
async function named<T>(field: string, url: string, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    if (message.startsWith(`${field}`)) throw e;
    throw new ArborError(`${field}: cannot start tracking at ${url}: ${message}`, e instanceof ArborError ? e.code : "unreachable");
  }
}
