// `arbor run --resume <run dir>`: the run's stored state and config, and the config the resumed run uses —
// the stored one (with `--set` overrides), or a config file given again — refused when it is not the same
// run, naming the first difference (only `iterations` may change, and only upward, to continue further). A run
// with `--cluster` resumes on the same deployment.
import { resolve } from "node:path";
import { clusterRunConfig, loadClusterRunConfig, withoutDeploymentKeys, type ClusterConfig } from "../core/cluster-config.js";
import { loadRunConfig, parseRunConfig, type RunConfig } from "../core/config.js";
import { applyOverrides, type ConfigOverride } from "../core/config-overrides.js";
import { ArborError } from "../core/errors.js";
import { configDifference, readResumeState, RESUME_FILE, type ResumeState } from "../loop/resume-state.js";

/**
 * The state of the run in `dir` and the config to continue it with.
 * @param configPath a config file given with `--resume` (optional: the stored config is the default)
 * @param cluster the deployment file given with `--cluster`: a run that ran on a deployment resumes on it (its
 *   stored config's run part merged again with the file), one that ran in one process without it
 * @throws ArborError when the state is missing or invalid, the config or deployment differs, or nothing is left to run
 */
export function loadResumedRun(dir: string, configPath: string | undefined, overrides: readonly ConfigOverride[], cluster?: ClusterConfig): { cfg: RunConfig; state: ResumeState } {
  const state = readResumeState(dir);
  checkDeployment(dir, state, cluster);
  const source = `${resolve(dir, RESUME_FILE)} config`;
  let cfg: RunConfig;
  if (configPath !== undefined) cfg = cluster ? loadClusterRunConfig(configPath, cluster, overrides) : loadRunConfig(configPath, overrides);
  else if (cluster) cfg = clusterRunConfig(applyOverrides(withoutDeploymentKeys(state.config as Record<string, unknown>), overrides, source), cluster, source);
  else cfg = parseRunConfig(applyOverrides(state.config, overrides, source), source);
  checkSameRun(`--resume ${dir}`, state, cfg);
  if (resolve(cfg.output.dir) !== resolve(dir)) {
    throw new ArborError(`--resume ${dir}: the run's output.dir is ${cfg.output.dir}; resume it from there`, "config");
  }
  if (state.completedIterations >= cfg.iterations) {
    throw new ArborError(`--resume ${dir}: the run has done all ${cfg.iterations} iterations; raise iterations (e.g. --set iterations=${cfg.iterations + 1}) to continue it`, "config");
  }
  return { cfg, state };
}

/**
 * Refuse `cfg` when it is not the config of the run `state` belongs to, naming the first difference.
 * @param option the option that gave the run, as the message starts (`--resume <dir>`, `--continue <dir>`)
 */
export function checkSameRun(option: string, state: ResumeState, cfg: RunConfig): void {
  const diff = configDifference(state.config, cfg, state.completedIterations);
  if (diff !== undefined) throw new ArborError(`${option}: the config is not the run's (${diff}); only iterations may be raised`, "config");
}

/** A run resumes where it ran: on the same deployment (by the cluster file's name), or in one process. */
function checkDeployment(dir: string, state: ResumeState, cluster: ClusterConfig | undefined): void {
  if (state.cluster !== undefined && cluster === undefined) {
    throw new ArborError(`--resume ${dir}: the run ran on the deployment '${state.cluster}': give its cluster file (--cluster <file>)`, "config");
  }
  if (state.cluster === undefined && cluster !== undefined) throw new ArborError(`--resume ${dir}: the run ran in one process, not on a deployment: resume it without --cluster`, "config");
  if (cluster !== undefined && cluster.name !== state.cluster) {
    throw new ArborError(`--resume ${dir}: the run ran on the deployment '${String(state.cluster)}', and this cluster file is '${cluster.name}' (its name)`, "config");
  }
}
