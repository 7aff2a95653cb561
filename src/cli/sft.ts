// `arbor sft`: supervised fine-tuning of the tiny policy on an environment's golden conversations
// (src/sft/sft.ts), with a progress bar, writing a GGUF that `model.path` in a run config can load.
import { existsSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import cliProgress from "cli-progress";
import { ArborError, SIGNAL_EXIT, SignalledError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { createEnvironment } from "../envs/registry.js";
import { runSft, type SftOptions } from "../sft/sft.js";
import type { SftVocab } from "../sft/sft-model.js";

export interface SftCommandOptions {
  env: string;
  /** Default: {@link sftDefaults}. */
  tasks?: number;
  taskSeed: number;
  steps: number;
  /** Default: {@link sftDefaults}. */
  batchSize?: number;
  lr: number;
  schedule: "constant" | "cosine";
  /** Default: {@link sftDefaults}. */
  warmupSteps?: number;
  seed: number;
  out: string;
  /** Start from this GGUF instead of seeded random weights. */
  from?: string;
  saveEvery?: number;
  nEmbd: number;
  nLayer: number;
  nHead: number;
  nFf: number;
  /** Vocabulary and chat template of a new policy (default "arbor"). */
  vocab?: SftVocab;
  /** How golden turns call tools (default "markup"). */
  toolMode?: "markup" | "native";
  progress: boolean;
}

/** The options `arbor sft` fills in per environment. */
export interface SftDefaults {
  tasks: number;
  evalTasks: number;
  batchSize: number;
  warmupSteps: number;
}

/**
 * Defaults that work for every environment: 20,000 generated tasks and 16 held out (calc, search-qa: the
 * recipe of models/calc-solver.gguf), or a fixed pool (swe-mini: 24) split into a sixth held out and the rest
 * for training; batches of 32 or all the training tasks if fewer; warm-up of 50 steps or a tenth of the steps
 * if fewer. Explicit options win. Throws the registry's error (naming the known environments) for an unknown one.
 */
export function sftDefaults(o: Pick<SftCommandOptions, "env" | "tasks" | "batchSize" | "warmupSteps" | "steps">): SftDefaults {
  const pool = createEnvironment(o.env).taskCount;
  const evalTasks = pool === undefined ? 16 : Math.max(1, Math.floor(pool / 6));
  const tasks = o.tasks ?? (pool === undefined ? 20_000 : pool - evalTasks);
  return { tasks, evalTasks, batchSize: o.batchSize ?? Math.min(32, tasks), warmupSteps: o.warmupSteps ?? Math.min(50, Math.floor(o.steps / 10)) };
}

/**
 * The checks between flags (each flag's own range is its parser's, main.ts), naming the flags: the training
 * code's own checks name its option fields, which a user of the command never typed.
 */
function checkFlags(o: SftCommandOptions, d: SftDefaults): void {
  if (o.schedule !== "constant" && o.schedule !== "cosine") throw new ArborError(`sft: --schedule must be 'constant' or 'cosine', got '${String(o.schedule)}'`, "config");
  if (d.batchSize > d.tasks) throw new ArborError(`sft: --batch-size (${d.batchSize}) must not exceed the training tasks (${d.tasks}, --tasks)`, "config");
  if (d.warmupSteps >= o.steps) throw new ArborError(`sft: --warmup-steps (${d.warmupSteps}) must be less than --steps (${o.steps})`, "config");
  if (o.from !== undefined && !existsSync(o.from)) throw new ArborError(`sft: --from: no such file: ${o.from}`, "config");
  if (o.from === undefined && o.nEmbd % o.nHead !== 0) throw new ArborError(`sft: --n-embd (${o.nEmbd}) must be divisible by --n-head (${o.nHead})`, "config");
}

/**
 * CLI entry: train, draw progress, print where the checkpoint went and its held-out numbers. SIGINT/SIGTERM
 * stop after the current step and still write the weights so far.
 */
export async function sftCommand(o: SftCommandOptions): Promise<void> {
  // The environment first: a misspelt name is the error to report, not a number that depends on it.
  const d = sftDefaults(o);
  checkFlags(o, d);
  const out = resolve(o.out);
  mkdirSync(dirname(out), { recursive: true });
  const started = realClock.now();
  const bar = o.progress
    ? new cliProgress.SingleBar(
        { format: "sft [{bar}] {value}/{total} steps | loss {loss} | held-out loss {evalLoss} acc {evalAcc} | {duration}s", hideCursor: true, stream: process.stderr },
        cliProgress.Presets.shades_classic,
      )
    : undefined;
  bar?.start(o.steps, 0, { loss: "-", evalLoss: "-", evalAcc: "-" });
  const stop = new AbortController();
  const onSignal = (sig: "SIGINT" | "SIGTERM"): void => stop.abort(new SignalledError(`received ${sig}`, sig));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const opts: SftOptions = {
    env: o.env,
    tasks: d.tasks,
    taskSeed: o.taskSeed,
    evalTasks: d.evalTasks,
    evalEvery: 20,
    init: o.from ? { path: resolve(o.from) } : { seed: o.seed, nEmbd: o.nEmbd, nLayer: o.nLayer, nHead: o.nHead, nHeadKv: o.nHead, nFf: o.nFf, contextLength: 2048 },
    steps: o.steps,
    ...(o.vocab !== undefined ? { vocab: o.vocab } : {}),
    ...(o.toolMode !== undefined ? { toolMode: o.toolMode } : {}),
    ...(o.saveEvery === undefined ? {} : { saveEvery: o.saveEvery }),
    batchSize: d.batchSize,
    lr: o.lr,
    schedule: o.schedule,
    warmupSteps: d.warmupSteps,
    seed: o.seed,
    out,
    clock: realClock,
    signal: stop.signal,
    onStep: async (s) => {
      const fields = { loss: s.loss.toFixed(3), ...(s.evalLoss === undefined ? {} : { evalLoss: s.evalLoss.toFixed(3), evalAcc: (s.evalAccuracy ?? 0).toFixed(3) }) };
      if (bar) bar.update(s.step, fields);
      else if (s.evalLoss !== undefined) console.error(`sft step ${s.step}/${s.steps}  loss ${fields.loss}  held-out loss ${fields.evalLoss} acc ${fields.evalAcc}`);
      // A step is synchronous wasm work: give a pending SIGINT/SIGTERM its turn between steps.
      await new Promise((r) => setImmediate(r));
    },
  };
  try {
    const r = await runSft(opts);
    bar?.stop();
    console.log(`\nArbor SFT`);
    console.log(`  checkpoint     ${r.out}`);
    console.log(`  steps          ${r.steps}${r.stopped ? ` of ${o.steps} (stopped by ${(stop.signal.reason as SignalledError).signal}; the weights so far were written)` : ""} (batch ${d.batchSize}, lr ${o.lr} ${o.schedule}, seed ${o.seed})`);
    console.log(`  data           ${o.env}: ${r.samples} training conversations${r.truncated > 0 ? `, ${r.truncated} cut to the model's context` : ""}, ${d.evalTasks} held out`);
    console.log(`  loss           ${r.firstLoss.toFixed(3)} → ${r.lastLoss.toFixed(3)}`);
    if (r.evalLoss !== undefined) console.log(`  held-out       loss ${r.evalLoss.toFixed(3)}, token accuracy ${(r.evalAccuracy ?? 0).toFixed(3)}`);
    console.log(`  elapsed        ${((realClock.now() - started) / 1000).toFixed(1)} s`);
    // Stopped early is not finished: a script chaining on `arbor sft` must not take this for the full run.
    if (r.stopped) process.exitCode = SIGNAL_EXIT[(stop.signal.reason as SignalledError).signal];
  } finally {
    bar?.stop();
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
