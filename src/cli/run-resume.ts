// `arbor run --resume <run dir>`: the run's stored state and config, and the config the resumed run uses —
// the stored one (with `--set` overrides), or a config file given again — refused when it is not the same
// run, naming the first difference (only `iterations` may change, and only upward, to continue further).
import { resolve } from "node:path";
import { loadRunConfig, parseRunConfig, type RunConfig } from "../core/config.js";
import { applyOverrides, type ConfigOverride } from "../core/config-overrides.js";
import { ArborError } from "../core/errors.js";
import { configDifference, readResumeState, RESUME_FILE, type ResumeState } from "../loop/resume-state.js";

/**
 * The state of the run in `dir` and the config to continue it with.
 * @param configPath a config file given with `--resume` (optional: the stored config is the default)
 * @throws ArborError when the state is missing or invalid, the config differs, or nothing is left to run
 */
export function loadResumedRun(dir: string, configPath: string | undefined, overrides: readonly ConfigOverride[]): { cfg: RunConfig; state: ResumeState } {
  const state = readResumeState(dir);
  const source = `${resolve(dir, RESUME_FILE)} config`;
  const cfg = configPath !== undefined ? loadRunConfig(configPath, overrides) : parseRunConfig(applyOverrides(state.config, overrides, source), source);
  const diff = configDifference(state.config, cfg, state.completedIterations);
  if (diff !== undefined) throw new ArborError(`--resume ${dir}: the config is not the run's (${diff}); only iterations may be raised`, "config");
  if (resolve(cfg.output.dir) !== resolve(dir)) {
    throw new ArborError(`--resume ${dir}: the run's output.dir is ${cfg.output.dir}; resume it from there`, "config");
  }
  if (state.completedIterations >= cfg.iterations) {
    throw new ArborError(`--resume ${dir}: the run has done all ${cfg.iterations} iterations; raise iterations (e.g. --set iterations=${cfg.iterations + 1}) to continue it`, "config");
  }
  return { cfg, state };
}
