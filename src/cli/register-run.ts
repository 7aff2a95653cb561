// `arbor run`'s arguments, registered by main.ts; apart so that the Kubernetes manifest checks read its options
// (src/testing/k8s-manifests.test.ts) without starting the CLI.
import type { Command } from "commander";
import { toPort } from "./arg-parsers.js";
import { DEFAULT_DASHBOARD_PORT } from "./serve.js";

/** Add `arbor run` to the `arbor` command. */
export function registerRunCommand(program: Command): void {
  program
    .command("run")
    .description("run rollout iterations from a YAML config: engines, gateway, agents in sandboxes, rewards, store, batch, and RL training with `train`")
    .argument("[config]", "path of the run config (YAML); optional with --resume (the run's stored config)")
    .option("--no-progress", "do not draw a progress bar")
    .option("--cluster <file>", "run on a deployment's services (cluster.yaml: its store, gateway, engines; programs on its workers)")
    .option("--set <key=value>", "override one setting of the run config: a dotted path, a YAML value (repeatable; e.g. --set train.lr=1e-4)", (v: string, acc: string[] | undefined) => [...(acc ?? []), v])
    .option("--resume <run dir>", "continue a killed or finished run from its output folder (resume.json): same config, only iterations may be raised (a run on a deployment: with its --cluster file again)")
    .option("--continue", "resume the config's run where its output.dir holds a resume.json left by a killed or finished process of it, else start it; a run with all its iterations done is left as it is (for a job that is retried or a service that is restarted)")
    .option("--dashboard [port]", "serve the live dashboard (web UI and JSON/SSE API) on 127.0.0.1 beside the run (default port 8600; 0 for any free port); prints its URL", toPort)
    .action(async (config: string | undefined, opts: { progress: boolean; cluster?: string; set?: string[]; resume?: string; continue?: boolean; dashboard?: number | true }) => {
      const { runCommand } = await import("./run.js");
      const dashboard = opts.dashboard === undefined ? {} : { dashboard: { port: opts.dashboard === true ? DEFAULT_DASHBOARD_PORT : opts.dashboard } };
      await runCommand(config, { progress: opts.progress && process.stderr.isTTY === true, ...(opts.cluster !== undefined ? { cluster: opts.cluster } : {}), ...(opts.resume !== undefined ? { resume: opts.resume } : {}), continue: opts.continue === true, sets: opts.set ?? [], ...dashboard });
    });
}
