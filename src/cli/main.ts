// The `arbor` command: parses arguments and hands each subcommand to its wiring module.
// Errors a user can fix print as one line (no stack trace unless --debug) and exit non-zero.
// Each command's module is imported only when that command runs: they load tfjs, llama.cpp, Fastify, the
// stores…, and `arbor --help` or `--version` should load commander and little else (src/cli/main.test.ts).
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { Command, CommanderError, Option } from "commander";
import { ArborError, SIGNAL_EXIT, SignalledError } from "../core/errors.js";
import { BENCHMARK_NAMES } from "../bench/benchmark-names.js";
import type { sftCommand } from "./sft.js";
import type { TrainWorkerCommandOptions } from "./train-worker.js";
import { toInt, toNonNegativeInt, toNumber, toPositiveInt, toPositiveNumber } from "./arg-parsers.js";
import { registerRunCommand } from "./register-run.js";
import { registerServeCommands } from "./serve.js";

// src/cli/ and dist/cli/ are both two levels below the package root.
const { version } = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };

const LOG_LEVEL_CHOICES = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
const LOG_FORMAT_CHOICES = ["text", "json"] as const;

const program = new Command()
  .name("arbor")
  .description("Agentic reinforcement-learning infrastructure for LLMs")
  .version(version, "-V, --version", "print the version of arbor")
  .option("--debug", "print stack traces of errors")
  .addOption(new Option("--log-level <level>", "lowest level of the logs written to stderr (env ARBOR_LOG_LEVEL)").choices(LOG_LEVEL_CHOICES))
  .addOption(new Option("--log-format <format>", "text: plain lines; json: pino's JSON lines for log collectors (env ARBOR_LOG_FORMAT)").choices(LOG_FORMAT_CHOICES))
  .exitOverride()
  // The logger (core/logger.ts, loaded by the commands that log) reads these, so --help loads no logging library.
  .hook("preAction", (root) => {
    const o = root.opts<{ logLevel?: string; logFormat?: string }>();
    if (o.logLevel !== undefined) process.env.ARBOR_LOG_LEVEL = o.logLevel;
    if (o.logFormat !== undefined) process.env.ARBOR_LOG_FORMAT = o.logFormat;
    // Checked for every command, not only those that log (which would refuse it) or ignore it (which would not).
    for (const [name, choices] of [["ARBOR_LOG_LEVEL", LOG_LEVEL_CHOICES], ["ARBOR_LOG_FORMAT", LOG_FORMAT_CHOICES]] as const) {
      const v = process.env[name];
      if (v && !(choices as readonly string[]).includes(v)) throw new ArborError(`${name}: must be one of ${choices.join(", ")}, got '${v}'`, "config");
    }
  });

// A reader that stops early (`arbor inspect … | head`) closes the pipe: the rest of the output is not wanted, which
// is no error (an unhandled EPIPE printed Node's stack trace).
process.stdout.on("error", (e: NodeJS.ErrnoException) => {
  if (e.code !== "EPIPE") throw e;
  process.exit(0);
});

registerRunCommand(program);
registerServeCommands(program);

program
  .command("sft")
  .description("fine-tune a policy (Arbor's tiny one, or a made-here BPE/SPM model) on an environment's golden conversations and write a GGUF")
  .option("--env <name>", "environment with golden conversations", "calc")
  .option("--tasks <n>", "distinct training tasks (default 20000, or a fixed pool less its held-out sixth: swe-mini 20)", toPositiveInt)
  .option("--task-seed <n>", "seed of the training tasks", toInt, 1000)
  .option("--steps <n>", "optimizer steps", toPositiveInt, 500)
  .option("--save-every <n>", "also write the GGUF every n steps", toPositiveInt)
  .option("--batch-size <n>", "conversations per step (default 32, or the training tasks if fewer)", toPositiveInt)
  .option("--lr <x>", "peak Adam learning rate", toPositiveNumber, 3e-3)
  .option("--schedule <kind>", "learning-rate schedule: constant, or cosine (warm-up, then decay to lr/10)", "cosine")
  .option("--warmup-steps <n>", "linear warm-up steps of the cosine schedule (default 50, or steps/10 if fewer)", toNonNegativeInt)
  .option("--seed <n>", "seed of the initial weights and of the batch order", toInt, 1)
  .option("--from <gguf>", "start from this GGUF instead of seeded random weights")
  .option("--n-embd <n>", "width of a new policy", toPositiveInt, 64)
  .option("--n-layer <n>", "blocks of a new policy", toPositiveInt, 2)
  .option("--n-head <n>", "attention heads of a new policy", toPositiveInt, 4)
  .option("--n-ff <n>", "feed-forward width of a new policy", toPositiveInt, 192)
  .addOption(new Option("--vocab <kind>", "vocabulary and chat template of a new policy: arbor, or a made-here bpe-chatml / spm-llama3").choices(["arbor", "bpe-chatml", "spm-llama3"]).default("arbor"))
  .addOption(new Option("--tool-mode <mode>", "golden tool calls in Arbor's markup or as the model's native tool calls").choices(["markup", "native"]).default("markup"))
  .requiredOption("--out <gguf>", "where to write the trained policy")
  .option("--no-progress", "do not draw a progress bar")
  .action(async (o: Omit<Parameters<typeof sftCommand>[0], "progress"> & { progress: boolean }) => {
    const { sftCommand } = await import("./sft.js");
    await sftCommand({ ...o, progress: o.progress && process.stderr.isTTY === true });
  });

program
  .command("train-worker")
  .description("train a run's policy in this process over the HTTP trainer protocol (arbor run with train.trainer: external): pull a batch, step the reference trainer, write a checkpoint, announce it, ack the batch")
  .requiredOption("--url <url>", "trainer protocol URL that `arbor run` printed (its `trainer` line)")
  .option("--from <gguf>", "the weights the run's engines serve now (default: the model path the run's trainer server reports: its model.path, or a resumed run's checkpoint)")
  .requiredOption("--out-dir <dir>", "where to write policy-v{N}.gguf checkpoints, in a folder per run (readable by the run's engines)")
  .option("--lr <x>", "Adam learning rate", toPositiveNumber, 1e-3)
  .option("--max-grad-norm <x>", "global gradient-norm limit", toNumber, 1)
  .option("--batches <n>", "stop after this many batches (default: until the run's server is gone)", toInt)
  .option("--poll-ms <n>", "wait between polls when no batch is queued", toInt, 200)
  .option("--keep-checkpoints <n>", "checkpoint versions kept on disk", toInt, 3)
  .option("--wait-ms <n>", "how long to wait at start for the run's trainer server to answer", toInt, 120_000)
  .action(async (o: TrainWorkerCommandOptions) => {
    const { trainWorkerCommand } = await import("./train-worker.js");
    await trainWorkerCommand(o);
  });

program
  .command("validate")
  .description("validate tasks: golden solution must pass, doing nothing must fail, optional judge panel; writes a report and the filtered dataset")
  .argument("<target>", "environment name (calc, swe-mini, search-qa), your environment module (./my-env.ts[#export], as env.module), tasks .jsonl, swe-mini task folder, or dataset folder with dataset.json")
  .option("--out <dir>", "output folder for report.json and the filtered dataset (default .arbor/validate/<name>)")
  .option("--env <name>", "environment of JSONL lines that name none")
  .option("--tasks <n>", "tasks to take from an environment", toPositiveInt)
  .option("--seed <n>", "seed of an environment's tasks", toInt)
  .option("--concurrency <n>", "tasks validated at once", toInt, 2)
  .option("--pass-score <x>", "checker score that counts as a pass", toNumber, 1)
  .option("--judge <model[@url]>", "a panel judge model, through --judge-gateway or its own gateway URL (repeatable)", (v: string, acc: string[]) => [...acc, v], [] as string[])
  .option("--judge-gateway <url>", "gateway origin the judges are called through")
  .option("--judge-admin-token-env <var>", "environment variable with the judge gateway's admin token")
  .option("--judge-attempts <n>", "attempts per judge and task", toPositiveInt, 3)
  .option("--judge-min-approvals <n>", "CONSISTENT votes needed to keep a task (default: a majority)", toPositiveInt)
  .option("--strict", "exit with status 2 when any task is dropped (status 1 whenever judges could not be reached)")
  .action(async (target: string, o: { out?: string; env?: string; tasks?: number; seed?: number; concurrency: number; passScore: number; judge: string[]; judgeGateway?: string; judgeAdminTokenEnv?: string; judgeAttempts: number; judgeMinApprovals?: number; strict?: boolean }, cmd: Command) => {
    if (o.judge.length === 0) {
      const judging = (["judgeGateway", "judgeAdminTokenEnv", "judgeMinApprovals", "judgeAttempts"] as const).find((k) => cmd.getOptionValueSource(k) === "cli");
      if (judging !== undefined) throw new ArborError(`--${judging.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} applies to the judge panel: give --judge <model> too`, "config");
    }
    const { validateCommand } = await import("../validate/validate-command.js");
    const report = await validateCommand(target, { ...o, judges: o.judge });
    // Undecided tasks (judges unreachable) are a failure of the validation itself, whatever --strict says.
    if (report.summary.byReason["judge-unreachable"] > 0) process.exitCode = 1;
    else if (o.strict && report.summary.dropped > 0) process.exitCode = 2;
  });

program
  .command("bench")
  .description("run a benchmark beside its baseline and print its tables (e.g. `arbor bench engine`)")
  .argument("<name>", `benchmark name: ${BENCHMARK_NAMES.join(", ")}`)
  .option("--quick", "small workloads: a smoke run, numbers indicative only")
  .action(async (name: string, opts: { quick?: boolean }) => {
    const { benchCommand } = await import("./bench.js");
    await benchCommand(name, { quick: opts.quick === true });
  });

program
  .command("sim")
  .description("simulate a workload under named systems on the virtual clock (cost-model engines, the real schedulers) and write a report (e.g. `arbor sim seer-moonlight --systems verl-like,seer,arbor`); `--reproduction` regenerates docs/reproduction.md")
  .argument("[workload]", "a shipped workload (seer-moonlight, seer-qwen2vl, seer-kimik2, thunder-swe, thunder-openhands, search-agent) or a workload .yaml file")
  .option("--systems <list>", "comma-separated systems (default: every system of the workload)")
  .option("--seed <n>", "seed of every random draw", toInt, 1)
  .option("--seeds <list>", "run once per seed (e.g. 1-5 or 1,4,9) and print each system's figures over the seeds (mean, sd, range); each seed's report goes to <out>/seed-<n>, the summary to <out>/seeds.json (default out .arbor/sim/<workload>-seeds); with --reproduction, every workload once per seed and the table's figures as means with their range")
  .option("--scale <f>", "fraction of the workload's requests and engines (1 = full scale)", toNumber, 1)
  .option("--jobs <n>", `systems run at once, each in a worker thread of its own (1: one after another in this process)`, toInt, availableParallelism())
  .option("--out <dir>", "report folder (default .arbor/sim/<workload>-<seed>; with --reproduction, .arbor/sim/reproduction, a folder per workload and, over several seeds, per seed)")
  .option("--json", "print the report as JSON instead of the summary table")
  .option("--reproduction", "run every workload of the reproduction table and write it (the papers' figures beside the simulated ones)")
  .option("--doc <file>", "with --reproduction: the document to write", "docs/reproduction.md")
  .option("--notes <file>", "with --reproduction: the gap attributions, a YAML map of row id → text", "docs/reproduction-notes.yaml")
  .option("--workloads <list>", "with --reproduction: only these workloads of the table (comma-separated)")
  .option("--reuse", "with --reproduction: take a workload's report from the output folder when one of the same seed, scale and systems is there (e.g. after editing the notes)")
  .option("--no-progress", "no bar per running system (a line as each starts and ends instead)")
  .action(async (workload: string | undefined, o: { systems?: string; seed: number; seeds?: string; scale: number; jobs: number; out?: string; json?: boolean; reproduction?: boolean; doc: string; notes: string; workloads?: string; reuse?: boolean; progress: boolean }, cmd: Command) => {
    const bars = o.progress && process.stderr.isTTY === true;
    const { writeSimReportFiles } = await import("./report/write-sim-report-files.js");
    if (o.seeds !== undefined && cmd.getOptionValueSource("seed") === "cli") throw new ArborError("--seed and --seeds: give one of them", "config");
    const { parseSeedList, simSeedsCommand } = await import("./sim-seeds.js");
    const seeds = o.seeds === undefined ? undefined : parseSeedList(o.seeds);
    if (o.reproduction !== true) {
      const only = (["doc", "notes", "workloads", "reuse"] as const).find((k) => cmd.getOptionValueSource(k) === "cli");
      if (only !== undefined) throw new ArborError(`--${only} applies with --reproduction only`, "config");
    }
    if (o.reproduction === true) {
      if (workload !== undefined || o.systems !== undefined) throw new ArborError("--reproduction runs the table's own workloads and systems: give no workload and no --systems", "config");
      const { reproduceCommand } = await import("./reproduce.js");
      const workloads = o.workloads?.split(",").map((w) => w.trim()).filter((w) => w.length > 0);
      const missing = await reproduceCommand({ seeds: seeds ?? [o.seed], scale: o.scale, jobs: o.jobs, doc: o.doc, notes: o.notes, ...(o.out !== undefined ? { out: o.out } : {}), ...(workloads ? { workloads } : {}), reuse: o.reuse === true, writeReportFiles: writeSimReportFiles, log: (l) => console.error(l) });
      if (missing.length > 0) process.exitCode = 2;
      return;
    }
    if (seeds !== undefined) {
      if (workload === undefined) throw new ArborError("give a workload", "config");
      await simSeedsCommand(workload, { ...o, seeds, writeReportFiles: writeSimReportFiles, progress: bars });
      return;
    }
    if (workload === undefined) throw new ArborError("give a workload (or --reproduction)", "config");
    const { simCommand } = await import("./sim.js");
    await simCommand(workload, { ...o, writeReportFiles: writeSimReportFiles, progress: bars });
  });

program
  .command("inspect")
  .description("print a store's runs and programs, or one program's trajectory as readable turns (tokens decoded, tool calls, context events, rewards, termination)")
  .argument("<store>", "the store: a SQLite file (a run's <output.dir>/store.sqlite), a run's output folder, or a postgres:// URL (?schema= for another schema)")
  .argument("[program]", "a program id: print its trajectory")
  .option("--json", "print JSON instead of text")
  .option("--model <gguf>", "decode with this GGUF's tokenizer instead of the run's model")
  .action(async (store: string, programId: string | undefined, o: { json?: boolean; model?: string }) => {
    const { inspectCommand } = await import("./inspect.js");
    await inspectCommand(store, programId, o);
  });

program
  .command("export")
  .description("write a store's trajectories (one row per call) and one batch per run as Parquet, JSONL, Arrow or safetensors files (docs/batch-schema.md)")
  .argument("<store>", "the store: a SQLite file (a run's <output.dir>/store.sqlite), a run's output folder, or a postgres:// URL (?schema= for another schema)")
  .option("--format <format>", "parquet, jsonl, arrow or safetensors", "parquet")
  .option("--out <dir>", "output folder: trajectories.<ext> and batches/<run id>.<ext> (default: export/ beside a SQLite store; required for a Postgres URL)")
  .action(async (store: string, o: { format: string; out?: string }) => {
    const { exportCommand } = await import("./export.js");
    await exportCommand(store, o);
  });

program
  .command("report")
  .description("write a report (report.json, a self-contained report.html with plots, key-plot.png) of a finished run's output folder, or draw again a folder holding an `arbor sim` report.json")
  .argument("<dir>", "a run's output folder (its store.sqlite and metrics.jsonl), or a folder holding a report.json")
  .option("--out <dir>", "where to write the files (default: <dir>/report for a run, <dir> for a report.json)")
  .option("--run <id>", "which run of the store (default: the run of <dir>/metrics.jsonl with --store, else the latest)")
  .option("--store <store>", "the run's store when it is not <dir>/store.sqlite: a Postgres URL (postgres://…?schema=…, a cluster run's) or a SQLite file")
  .action(async (dir: string, o: { out?: string; run?: string; store?: string }) => {
    const { reportCommand } = await import("./report-command.js");
    await reportCommand(dir, o);
  });

const hf = program.command("hf").description("Hugging Face checkpoints: export a policy GGUF, convert a checkpoint to GGUF for serving");
hf.command("export")
  .description("write a llama GGUF (e.g. the tiny policy) as a Hugging Face LlamaForCausalLM checkpoint: config.json, model.safetensors, tokenizer.json, tokenizer_config.json, generation_config.json")
  .argument("<policy>", "the GGUF to export (F32, F16 or BF16 llama weights)")
  .argument("<dir>", "output directory (created if missing)")
  .action(async (policy: string, dir: string) => (await import("./hf.js")).hfExportCommand(policy, dir));
hf.command("convert")
  .description("convert a Hugging Face llama or qwen2 checkpoint (F32, F16 or BF16 safetensors, sharded or not) to an F32 GGUF the engine serves")
  .argument("<hf-dir>", "the checkpoint directory (config.json, *.safetensors, tokenizer.json)")
  .argument("<out>", "the GGUF to write")
  .action(async (dir: string, out: string) => (await import("./hf.js")).hfConvertCommand(dir, out));

try {
  await program.parseAsync(process.argv);
} catch (e) {
  process.exitCode = reportError(e, program.opts<{ debug?: boolean }>().debug === true || process.env.ARBOR_DEBUG === "1");
}

function reportError(e: unknown, debug: boolean): number {
  if (e instanceof CommanderError) return e.exitCode; // commander already printed the message
  if (debug && e instanceof Error) console.error(e.stack);
  else if (e instanceof ArborError) console.error(`arbor: error: ${e.message}`);
  else console.error(`arbor: unexpected error: ${e instanceof Error ? e.message : String(e)} (run with --debug for the stack trace)`);
  // An abort that names no signal counts as SIGINT (the user's ctrl-C).
  if (e instanceof SignalledError) return SIGNAL_EXIT[e.signal];
  return e instanceof ArborError && e.code === "aborted" ? SIGNAL_EXIT.SIGINT : 1;
}

// Native handles (llama.cpp, sockets) must not keep a finished command alive; the timer is unref'd,
// so it only fires when something else still holds the event loop open.
setTimeout(() => process.exit(), 3000).unref();
