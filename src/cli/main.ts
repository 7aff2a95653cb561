// The `arbor` command: parses arguments and hands each subcommand to its wiring module.
// Errors a user can fix print as one line (no stack trace unless --debug) and exit non-zero.
import { Command, CommanderError } from "commander";
import { ArborError } from "../core/errors.js";
import { benchCommand } from "./bench.js";
import { runCommand } from "./run.js";

const program = new Command()
  .name("arbor")
  .description("Agentic reinforcement-learning infrastructure for LLMs")
  .option("--debug", "print stack traces of errors")
  .exitOverride();

program
  .command("run")
  .description("run a rollout iteration from a YAML config: engines, gateway, agents in sandboxes, rewards, store, batch")
  .argument("<config>", "path of the run config (YAML)")
  .option("--no-progress", "do not draw a progress bar")
  .action(async (config: string, opts: { progress: boolean }) => {
    await runCommand(config, { progress: opts.progress && process.stderr.isTTY === true });
  });

program
  .command("bench")
  .description("run a benchmark beside its baseline and print its tables (e.g. `arbor bench engine`)")
  .argument("<name>", "benchmark name")
  .option("--quick", "small workloads: a smoke run, numbers indicative only")
  .action(async (name: string, opts: { quick?: boolean }) => {
    await benchCommand(name, { quick: opts.quick === true });
  });

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
  // 130 is the shell convention for "ended by SIGINT".
  return e instanceof ArborError && e.code === "aborted" ? 130 : 1;
}

// Native handles (llama.cpp, sockets) must not keep a finished command alive; the timer is unref'd,
// so it only fires when something else still holds the event loop open.
setTimeout(() => process.exit(), 3000).unref();
