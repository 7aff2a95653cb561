// `arbor run --set key=value`: settings of a run config given on the command line. Each is applied to the
// parsed YAML before validation, so a wrong path or value gets the very error the same setting in the file
// would get (the run config's schema is strict: an unknown key is refused, naming its path).
import { parse as parseYaml } from "yaml";
import { ArborError } from "./errors.js";

/** One `--set`: a dotted path into the run config and the value, parsed as YAML. */
export interface ConfigOverride {
  /** The path's segments (`train.lr` → ["train", "lr"]; a number indexes a list: `engines.0.sequences`). */
  path: string[];
  value: unknown;
}

/**
 * Parse one `key=value` argument: the key a dotted path, the value YAML (`3`, `1e-4`, `true`, `null`, `text`,
 * `[a, b]`, `{k: v}`; an empty value is null, as in a YAML file).
 * @throws ArborError when there is no `=`, a path segment is empty, or the value is not YAML.
 */
export function parseOverride(arg: string): ConfigOverride {
  const eq = arg.indexOf("=");
  if (eq < 0) throw new ArborError(`--set ${arg}: expected key=value (e.g. train.lr=1e-4)`, "config");
  const key = arg.slice(0, eq).trim();
  const path = key.split(".");
  if (path.some((s) => s === "")) throw new ArborError(`--set ${arg}: '${key}' is not a dotted path (e.g. train.lr)`, "config");
  try {
    return { path, value: parseYaml(arg.slice(eq + 1)) as unknown };
  } catch (e) {
    throw new ArborError(`--set ${arg}: the value is not YAML: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`, "config");
  }
}

/**
 * A copy of the parsed run config `raw` with the overrides applied in order (a later one wins). Missing
 * mappings on the way are created; the schema judges the result.
 * @param source names the config in errors, as the loader does (`config run.yaml`)
 * @throws ArborError when a path goes through a value that is not a mapping (or a list, by index).
 */
export function applyOverrides(raw: unknown, overrides: readonly ConfigOverride[], source: string): unknown {
  if (overrides.length === 0) return raw;
  const root: unknown = structuredClone(raw ?? {});
  if (!isMapping(root)) throw new ArborError(`invalid ${source}: (root): must be a mapping to apply --set`, "config");
  for (const { path, value } of overrides) {
    let node: Record<string, unknown> | unknown[] = root;
    path.forEach((seg, i) => {
      const where = path.slice(0, i + 1).join(".");
      const last = i === path.length - 1;
      if (Array.isArray(node)) {
        const index = Number(seg);
        if (!/^\d+$/.test(seg) || index >= node.length) {
          throw new ArborError(`invalid ${source}: ${where}: ${path.slice(0, i).join(".")} is a list of ${node.length}; index it with 0..${node.length - 1}`, "config");
        }
        if (last) node[index] = value;
        else node = descend(node[index], where, source);
        return;
      }
      if (last) node[seg] = value;
      else {
        if (node[seg] === undefined || node[seg] === null) node[seg] = {};
        node = descend(node[seg], where, source);
      }
    });
  }
  return root;
}

function descend(child: unknown, where: string, source: string): Record<string, unknown> | unknown[] {
  if (Array.isArray(child) || isMapping(child)) return child;
  throw new ArborError(`invalid ${source}: ${where}: is ${JSON.stringify(child)}, not a mapping, so --set cannot go inside it`, "config");
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
