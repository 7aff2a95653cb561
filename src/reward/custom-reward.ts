// The user's reward functions (`reward.custom: ./my-reward.ts#score`): each export is a function scoring a
// finished program from its RewardContext (a number, or {value, steps} split over the calls; async allowed),
// or a whole RewardFn object. Each becomes one component of the composed reward with its own name and
// weight, stored beside the shipped components. Values are checked where they are produced, naming the module.
import { ArborError } from "../core/errors.js";
import { loadModuleExport, parseModuleSpec } from "../core/load-module.js";
import type { WeightedRewardFn } from "./compose.js";
import type { RewardContext, RewardFn, RewardValue } from "./reward-fn.js";

/** One custom reward as the config gives it (paths already absolute: core/config.ts resolveConfigPaths). */
export interface CustomRewardSpec {
  module: string;
  /** Component name; default: the export's name in kebab-case (the file's name for a default export). */
  name?: string;
  weight: number;
}

const KEBAB = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;

/** `scoreLength` → `score-length`; a file name `my_reward.ts` → `my-reward`. */
export function kebabName(s: string): string {
  return s
    .replace(/\.[cm]?[jt]s$/, "")
    .replace(/([a-z0-9])([A-Z])/g, "$1-$2")
    .replace(/[^A-Za-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .toLowerCase();
}

function defaultName(spec: string): string {
  const { path, exportName } = parseModuleSpec(spec);
  return kebabName(exportName === "default" ? (path.split(/[\\/]/).pop() ?? path) : exportName);
}

/** True for an `async function`: its component is asynchronous (computed per group, compose.ts). */
function isAsyncFunction(f: unknown): boolean {
  return typeof f === "function" && f.constructor?.name === "AsyncFunction";
}

/**
 * Wrap a scoring function as a RewardFn named `name`. A value that is neither a finite number nor a {value, steps}
 * split throws naming the reward and the program; a plain function that returns a promise must be declared async.
 */
export function rewardFnOf(name: string, score: (ctx: RewardContext) => unknown, where: string): RewardFn {
  const isAsync = isAsyncFunction(score);
  const checked = (v: unknown, ctx: RewardContext): RewardValue => {
    if (typeof v === "number" && Number.isFinite(v)) return v;
    if (typeof v === "object" && v !== null && typeof (v as { value?: unknown }).value === "number" && Array.isArray((v as { steps?: unknown }).steps)) return v as RewardValue;
    throw new ArborError(`reward.custom ${name} (${where}): returned ${v instanceof Promise ? "a promise from a function not declared async" : JSON.stringify(v) ?? String(v)} for program '${ctx.trajectory.program.id}' (expected a finite number or {value, steps})`, "reward");
  };
  return {
    name,
    ...(isAsync ? { isAsync: true } : {}),
    compute(ctx: RewardContext): RewardValue | Promise<RewardValue> {
      const v = score(ctx);
      return isAsync ? Promise.resolve(v).then((x) => checked(x, ctx)) : checked(v, ctx);
    },
  };
}

/**
 * Load the reward functions of `specs`, each with its weight. Throws an {@link ArborError} for a missing module
 * or export, an export that is neither a function nor a RewardFn, or a name that is not kebab-case.
 */
export async function loadCustomRewards(specs: readonly CustomRewardSpec[]): Promise<WeightedRewardFn[]> {
  const out: WeightedRewardFn[] = [];
  for (const spec of specs) {
    const where = `reward.custom ${spec.module}`;
    const exported = await loadModuleExport(spec.module, "reward.custom");
    let fn: RewardFn;
    if (typeof exported === "function") {
      const name = spec.name ?? defaultName(spec.module);
      if (!KEBAB.test(name)) throw new ArborError(`${where}: component name '${name}' is not kebab-case; give reward.custom[].name`, "config");
      fn = rewardFnOf(name, exported as (ctx: RewardContext) => unknown, spec.module);
    } else if (typeof exported === "object" && exported !== null && typeof (exported as RewardFn).compute === "function") {
      const obj = exported as RewardFn;
      if (typeof obj.name !== "string" || !KEBAB.test(obj.name)) throw new ArborError(`${where}: the RewardFn's 'name' must be kebab-case (got ${JSON.stringify(obj.name)})`, "config");
      if (spec.name !== undefined && spec.name !== obj.name) throw new ArborError(`${where}: name '${spec.name}' differs from the RewardFn's own name '${obj.name}'`, "config");
      fn = obj;
    } else {
      throw new ArborError(`${where}: the export must be a function (ctx) => number or a RewardFn {name, compute}, got ${exported === null ? "null" : typeof exported}`, "config");
    }
    out.push({ fn, weight: spec.weight });
  }
  return out;
}
