// `arbor train-worker`: Arbor's reference trainer as an external trainer in its own process, speaking the HTTP
// trainer protocol to `arbor run` (train.trainer: external): pull a batch, step on the samples that carry an
// advantage (packed as a prefix tree, as the in-process path does), write `policy-v{N}.gguf` into the run's folder of
// `--out-dir` (`<out-dir>/<run id>/`: a later run's versions never replace an earlier run's), announce it and
// only then ack the batch with the step's loss, gradient norm and entropy (docs/batch-schema.md). A batch
// without signal is acked without a step. Adam's state is written beside each checkpoint
// (`policy-v{N}.adam.safetensors`), so a worker started again on a resumed run (`arbor run --resume`) goes on from the
// run's last version with the moments the uninterrupted worker would have had: by default it starts from the weights
// the run's engines serve (GET /v1/stats, read with its first batch), and loads the optimizer state found beside them;
// a later batch from a run at another version (a trainer-api's next or resumed run) makes it start again from the
// weights the server names. It is also the reference for writing such a loop around another trainer.
import { lineLog, processLog } from "../core/logger.js";
import { existsSync, mkdirSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { TrainerClient } from "../batch/trainer-client.js";
import { buildTreeBatch } from "../batch/tree/tree-batch.js";
import type { Clock, Timer } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { samplesWithSignal } from "../loop/rl-update.js";
import type { Trainer as TfTrainer } from "../trainer/trainer.js";
import { checkpointFileName, optimizerFileName, removeCheckpointsAfter } from "../trainer/checkpoint.js";
import { fileSafeName } from "../core/file-safe-name.js";

/** Options of {@link runTrainWorker}. */
export interface TrainWorkerOptions {
  /** Trainer protocol URL (what `arbor run` printed), e.g. http://127.0.0.1:8400. */
  url: string;
  /**
   * GGUF of the weights the run's engines serve now (the run's `model.path`, or the latest checkpoint); default: the
   * `modelPath` the run's trainer server reports (GET /v1/stats).
   */
  from?: string;
  /**
   * Where checkpoints `policy-v{N}.gguf` (+ manifest.json) are written, in a folder per run (`<outDir>/<run id>/`, the
   * run GET /v1/stats names); the run's engines must be able to read them.
   */
  outDir: string;
  /** Adam learning rate (default 1e-3). */
  lr?: number;
  /** Global gradient-norm limit (default 1). */
  maxGradNorm?: number;
  /** Stop after this many acked batches (default: until the server is gone). */
  batches?: number;
  /** Wait between polls when no batch is queued, ms (default 200). */
  pollMs?: number;
  /** Checkpoint versions kept on disk (default 3). */
  keepCheckpoints?: number;
  /**
   * How long to wait for the server at start, ms (default 120 000): a worker may be started before the run
   * that serves the protocol is listening.
   */
  waitMs?: number;
  clock?: Clock;
  /** Ends the loop between batches (a batch being trained is finished, announced and acked first). */
  signal?: AbortSignal;
  log?: (line: string) => void;
}

/** What one batch did. */
export interface TrainedBatch {
  id: string;
  /** False when no sample carried an advantage: acked without a step or an announcement. */
  stepped: boolean;
  /** Policy version after the batch. */
  version: number;
  checkpoint?: string;
  loss?: number;
  samples: number;
  trainedSamples: number;
}

/** Why the loop ended and what it did. */
export interface TrainWorkerResult {
  reason: "batches" | "server-gone" | "aborted";
  batches: TrainedBatch[];
  /** Policy version of the worker's weights at the end. */
  version: number;
}

function check(name: string, v: number | undefined, ok: (v: number) => boolean, what: string): void {
  if (v !== undefined && !ok(v)) throw new ArborError(`train-worker: ${name} must be ${what}, got ${v}`, "config");
}

/** Whether a protocol error means the server went away (unreachable, or closing and answering 503). */
function serverGone(e: unknown): boolean {
  return e instanceof ArborError && e.code === "trainer_protocol" && /cannot reach|HTTP 503/.test(e.message);
}

/**
 * Train on the batches of one trainer protocol server until `batches` are acked, the server is gone (after
 * at least one batch; before, that is an error) or `signal` aborts. A failing batch is requeued before the
 * error is thrown, so the run can hand it to another trainer.
 */
export async function runTrainWorker(o: TrainWorkerOptions): Promise<TrainWorkerResult> {
  check("--lr", o.lr, (v) => v > 0, "> 0");
  check("--max-grad-norm", o.maxGradNorm, (v) => v > 0, "> 0");
  check("--batches", o.batches, (v) => Number.isInteger(v) && v >= 1, "an integer >= 1");
  check("--poll-ms", o.pollMs, (v) => Number.isInteger(v) && v >= 1, "an integer >= 1");
  check("--wait-ms", o.waitMs, (v) => Number.isInteger(v) && v >= 0, "an integer >= 0");
  // Checked here, not at the first checkpoint: that is after a batch was pulled and stepped.
  check("--keep-checkpoints", o.keepCheckpoints, (v) => Number.isInteger(v) && v >= 1, "an integer >= 1");
  const clock = o.clock ?? realClock;
  const log = o.log ?? (() => {});
  const pollMs = o.pollMs ?? 200;
  const client = new TrainerClient(o.url.replace(/\/+$/, ""));
  // Versions continue from the run's: the next announcement must exceed what the engines serve.
  const waitMs = o.waitMs ?? 120_000;
  // Said once, so that a worker started before its run (or at a wrong URL) does not wait minutes in silence.
  const onMiss = (e: Error): void => log(`train-worker  ${o.url}: not reachable yet (${e.message}); retrying for up to ${waitMs / 1000} s (--wait-ms)`);
  const start = await untilReachable(() => client.stats(), clock, waitMs, o.signal, onMiss);
  if (o.from !== undefined && !existsSync(o.from)) throw new ArborError(`train-worker: --from ${o.from}: no such file`, "config");
  mkdirSync(o.outDir, { recursive: true });
  /** The weights being trained: loaded at the first batch, and again whenever the run's version is not theirs. */
  let trainer: TfTrainer | undefined;
  /** The run they are trained for, and where its checkpoints go (`<out-dir>/<run id>/`: runs never share one). */
  let run: { id: string | null; dir: string } | undefined;
  /**
   * The trainer for the run and version the engines serve now (GET /v1/stats, read once a batch is taken: a
   * trainer-api learns the run and its version with its batch): this worker's own weights while they are that run's
   * at that version, else loaded from `--from` (first) or the server's model path — a resumed run's checkpoint, a
   * new run's model.
   */
  const follow = async (): Promise<{ tf: TfTrainer; dir: string }> => {
    const s = await client.stats();
    const runId = s.runId ?? null;
    if (trainer !== undefined && run !== undefined && trainer.version === s.policyVersion && run.id === runId) return { tf: trainer, dir: run.dir };
    const from = trainer === undefined && o.from !== undefined ? o.from : s.modelPath;
    if (from === null) throw new ArborError(`train-worker: ${o.url} reports no model path; give --from <gguf> (the weights the run's engines serve)`, "config");
    if (trainer !== undefined) {
      const what = run?.id !== runId ? `run ${runId ?? "(unnamed)"}` : `policy version ${s.policyVersion}, not this worker's ${trainer.version}`;
      log(`train-worker  ${o.url}: the server serves ${what}: starting again from ${from}`);
    }
    trainer?.dispose();
    trainer = undefined;
    const dir = runCheckpointDir(o.outDir, runId);
    trainer = await loadTrainer(from, s.policyVersion, dir, o, clock, log);
    run = { id: runId, dir };
    return { tf: trainer, dir };
  };
  const done: TrainedBatch[] = [];
  const end = (reason: TrainWorkerResult["reason"]): TrainWorkerResult => ({ reason, batches: done, version: trainer?.version ?? start.policyVersion });
  try {
    for (;;) {
      if (o.batches !== undefined && done.length >= o.batches) return end("batches");
      if (o.signal?.aborted) return end("aborted");
      let batch;
      try {
        batch = await client.nextBatch();
      } catch (e) {
        if (serverGone(e) && done.length > 0) {
          log(`train-worker  ${o.url} is gone after ${done.length} batch(es); stopping`);
          return end("server-gone");
        }
        throw e;
      }
      if (batch === null) {
        await sleep(clock, pollMs, o.signal);
        continue;
      }
      // The server gives a batch that it hears nothing of for its lease to another trainer: say this one is alive.
      const stopBeats = start.leaseMs !== undefined ? heartbeats(client, batch.id, Math.max(1, Math.floor(start.leaseMs / 3)), clock, log) : () => {};
      try {
        const { tf, dir } = await follow();
        const useful = samplesWithSignal(batch.samples);
        if (useful.length === 0) {
          await client.ack(batch.id);
          done.push({ id: batch.id, stepped: false, version: tf.version, samples: batch.samples.length, trainedSamples: 0 });
          log(`train-worker  batch ${batch.id}: no sample carries an advantage; acked without a step (policy v${tf.version})`);
          continue;
        }
        const tb = buildTreeBatch(useful, batch.loss);
        const r = tf.step({ tree: tb.tree, termUnit: tb.termUnit, loss: tb.loss, sampleIds: useful.map((s) => s.id) });
        const { path } = tf.checkpoint(dir, o.keepCheckpoints);
        await tf.saveOptimizerState(join(dir, optimizerFileName(r.version)));
        // The protocol's order: the engines serve the new weights before the batch counts as trained.
        await client.announceWeights(r.version, path, batch.id);
        // The run records what the step measured as it does its in-process trainer's (metrics.jsonl, TensorBoard).
        await client.ack(batch.id, { loss: r.loss, gradNorm: r.gradNorm, entropy: r.entropy });
        done.push({ id: batch.id, stepped: true, version: r.version, checkpoint: path, loss: r.loss, samples: batch.samples.length, trainedSamples: useful.length });
        log(
          `train-worker  batch ${batch.id}: loss ${r.loss.toFixed(4)}  grad ${r.gradNorm.toFixed(3)}  tokens ${tb.stats.treeTokens} tree / ${tb.stats.flatTokens} flat (${useful.length}/${batch.samples.length} samples)  policy v${r.version} (${path})`,
        );
      } catch (e) {
        // Give the batch back so that it is not stuck in flight; the server may be gone already.
        await client.requeue(batch.id).catch(() => {});
        throw e;
      } finally {
        stopBeats();
      }
    }
  } finally {
    trainer?.dispose();
  }
}

/**
 * Where a run's checkpoints go: `<out-dir>/<run id>/` (the id as one folder name, `fileSafeName`), or `out-dir`
 * itself for a server that names no run. A run's folder holds its versions alone, so a run's removal of its later
 * versions (below) never touches another run's.
 */
export function runCheckpointDir(outDir: string, runId: string | null): string {
  return runId === null ? outDir : join(outDir, fileSafeName(runId));
}

/**
 * The reference trainer on `from` at `version`, with Adam's state when `from` is this worker's checkpoint of that
 * version (`policy-v{N}.gguf` with `policy-v{N}.adam.safetensors` beside it); checkpoints of later versions in the
 * run's folder `dir` are removed first (a killed run's unrecorded steps: versions must increase).
 */
async function loadTrainer(from: string, version: number, dir: string, o: TrainWorkerOptions, clock: Clock, log: (line: string) => void): Promise<TfTrainer> {
  mkdirSync(dir, { recursive: true });
  const removed = removeCheckpointsAfter(dir, version);
  if (removed.length > 0) log(`train-worker  removed checkpoints ${removed.map((v) => `v${v}`).join(", ")} from ${dir}: the run serves version ${version} (a killed run's unrecorded steps)`);
  const { Trainer } = await import("../trainer/trainer.js");
  const trainer = await Trainer.fromGguf(from, { lr: o.lr ?? 1e-3, maxGradNorm: o.maxGradNorm ?? 1, version, clock });
  const adam = basename(from) === checkpointFileName(version) ? join(dirname(from), optimizerFileName(version)) : undefined;
  const resumed = adam !== undefined && existsSync(adam);
  try {
    if (resumed) await trainer.loadOptimizerState(adam);
  } catch (e) {
    trainer.dispose();
    throw e;
  }
  log(`train-worker  ${o.url}: training ${from} from policy version ${version}${resumed ? ` with its optimizer state (${adam})` : ""}, checkpoints in ${dir}`);
  return trainer;
}

/**
 * Heartbeats for `batchId` every `everyMs` until the returned function is called (a failed one is said, not thrown:
 * the batch's ack or requeue tells the worker what the server thinks). They go out between the step's synchronous
 * parts; the server's lease is longer than such a part.
 */
function heartbeats(client: TrainerClient, batchId: string, everyMs: number, clock: Clock, log: (line: string) => void): () => void {
  let timer: Timer | undefined;
  let stopped = false;
  const beat = (): void => {
    timer = clock.setTimer(everyMs, () => {
      void client
        .heartbeat(batchId)
        .catch((e: unknown) => log(`train-worker  batch ${batchId}: heartbeat failed: ${(e as Error).message}`))
        .finally(() => {
          if (!stopped) beat();
        });
    });
  };
  beat();
  return () => {
    stopped = true;
    timer?.cancel();
  };
}

/**
 * `call()`, retried every 500 ms while the server cannot be reached, for at most `waitMs` (`onMiss` told of the first
 * miss); then its last error, saying how long it was retried.
 */
async function untilReachable<T>(call: () => Promise<T>, clock: Clock, waitMs: number, signal?: AbortSignal, onMiss?: (e: Error) => void): Promise<T> {
  const deadline = clock.now() + waitMs;
  for (let missed = false; ; missed = true) {
    try {
      return await call();
    } catch (e) {
      if (!serverGone(e) || signal?.aborted) throw e;
      if (clock.now() >= deadline) throw new ArborError(`${(e as Error).message} (retried for ${waitMs / 1000} s, --wait-ms)`, "trainer_protocol");
      if (!missed) onMiss?.(e as Error);
    }
    await sleep(clock, 500, signal);
  }
}

/** Sleep `ms` on the clock, or less when `signal` aborts. */
function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolveSleep) => {
    const onAbort = (): void => {
      timer.cancel();
      resolveSleep();
    };
    const timer = clock.setTimer(ms, () => {
      signal?.removeEventListener("abort", onAbort);
      resolveSleep();
    });
    if (signal?.aborted) onAbort();
    else signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Options of the `arbor train-worker` command (commander's names). */
export interface TrainWorkerCommandOptions {
  url: string;
  from?: string;
  outDir: string;
  lr: number;
  maxGradNorm: number;
  batches?: number;
  pollMs: number;
  keepCheckpoints: number;
  waitMs: number;
}

/** CLI entry: run the worker until the run is over (or --batches), ending between batches on SIGINT/SIGTERM. */
export async function trainWorkerCommand(o: TrainWorkerCommandOptions): Promise<void> {
  const abort = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => abort.abort(new Error(`received ${sig}`));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const r = await runTrainWorker({
      url: o.url,
      ...(o.from !== undefined ? { from: resolve(o.from) } : {}),
      outDir: resolve(o.outDir),
      lr: o.lr,
      maxGradNorm: o.maxGradNorm,
      ...(o.batches === undefined ? {} : { batches: o.batches }),
      pollMs: o.pollMs,
      keepCheckpoints: o.keepCheckpoints,
      waitMs: o.waitMs,
      signal: abort.signal,
      log: lineLog(processLog("train-worker")),
    });
    const steps = r.batches.filter((b) => b.stepped).length;
    const why = { batches: `--batches ${o.batches} reached`, "server-gone": "the run's trainer server is gone", aborted: "interrupted" }[r.reason];
    console.log(`train-worker: ${r.batches.length} batch(es), ${steps} step(s), policy v${r.version} (${why})`);
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
