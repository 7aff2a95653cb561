// A run config shipped in Arbor's package (`examples/…`), loaded so that it runs from any working directory: a
// benchmark that needs a real run (`arbor bench tree` without one) starts the quick start wherever the user is,
// not only in a checkout. Its output still goes under the working directory (where the benchmark looks next time).
import { existsSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { loadRunConfig, type RunConfig } from "../core/config.js";

/** The package's root (this file is in src/cli or dist/cli). */
export const PACKAGE_ROOT = join(import.meta.dirname, "../..");

/**
 * Load the package's run config at `path` (relative to the package root). Its `model.path`, relative to the working
 * directory in a config, is taken from the package when `cwd` has no such file (the quick start's GGUF ships in
 * `models/`).
 */
export function loadShippedExample(path: string, cwd: string = process.cwd(), root: string = PACKAGE_ROOT): RunConfig {
  const cfg = loadRunConfig(resolve(root, path));
  const model = cfg.model.path;
  if (model === undefined || isAbsolute(model) || existsSync(resolve(cwd, model)) || !existsSync(join(root, model))) return cfg;
  return { ...cfg, model: { ...cfg.model, path: join(root, model) } };
}
