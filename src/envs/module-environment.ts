// A user's environment from a module (`env.module: ./my-env.ts` or `./envs.mjs#wordCount`): the export is an
// Environment object, or a factory that returns one (called with the options every shipped factory gets).
// Its shape is checked when it loads, so a wrong module fails before the run starts with the field named.
import { ArborError } from "../core/errors.js";
import { loadModuleExport } from "../core/load-module.js";
import type { Environment } from "./env.js";
import type { EnvironmentOptions } from "./registry.js";

/** Members every environment has, and the optional ones that must be functions when present. */
const REQUIRED_FUNCTIONS = ["tasks", "tools", "setup", "check", "golden", "solveGolden"] as const;
const OPTIONAL_FUNCTIONS = ["variants", "hygieneRecord", "agentExec"] as const;

/**
 * Check that `value` has an Environment's shape: a non-empty `name`, the required methods, optional members of
 * the right types and tools each with a name, a description and a `run` function. Throws an {@link ArborError}
 * naming `where` and the first wrong field.
 */
export function checkEnvironmentShape(value: unknown, where: string): Environment {
  const bad = (why: string): never => {
    throw new ArborError(`${where}: not an Environment: ${why}`, "config");
  };
  if (typeof value !== "object" || value === null) bad(`expected an object, got ${describe(value)}`);
  const env = value as Record<string, unknown>;
  if (typeof env.name !== "string" || env.name === "") bad(`'name' must be a non-empty string (got ${describe(env.name)})`);
  for (const f of REQUIRED_FUNCTIONS) if (typeof env[f] !== "function") bad(`'${f}' must be a function (got ${describe(env[f])})`);
  for (const f of OPTIONAL_FUNCTIONS) if (env[f] !== undefined && typeof env[f] !== "function") bad(`'${f}' must be a function when given (got ${describe(env[f])})`);
  if (env.taskCount !== undefined && !(Number.isInteger(env.taskCount) && (env.taskCount as number) >= 0)) bad(`'taskCount' must be an integer >= 0 when given (got ${describe(env.taskCount)})`);
  if (env.nativeSystemPrompt !== undefined && typeof env.nativeSystemPrompt !== "string") bad(`'nativeSystemPrompt' must be a string when given (got ${describe(env.nativeSystemPrompt)})`);
  const tools = (env.tools as () => unknown)();
  if (!Array.isArray(tools)) bad(`'tools()' must return an array (got ${describe(tools)})`);
  (tools as unknown[]).forEach((t, i) => {
    const tool = (t ?? {}) as Record<string, unknown>;
    if (typeof tool.name !== "string" || !/^[A-Za-z_][\w-]*$/.test(tool.name)) bad(`tools()[${i}].name must be a tool name like 'calc' (got ${describe(tool.name)})`);
    if (typeof tool.description !== "string") bad(`tools()[${i}].description must be a string (got ${describe(tool.description)})`);
    if (typeof tool.run !== "function") bad(`tools()[${i}].run must be a function (got ${describe(tool.run)})`);
  });
  return value as Environment;
}

function describe(v: unknown): string {
  if (v === null || v === undefined) return String(v);
  if (Array.isArray(v)) return "an array";
  if (typeof v === "string") return `string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  return typeof v === "object" || typeof v === "function" ? `a ${typeof v}` : `${typeof v} ${String(v)}`;
}

/**
 * Load the environment of `spec` (`path` or `path#export`, path resolved against the working directory: the
 * config loader makes it absolute). A function export is a factory and is called with `opts`.
 */
export async function loadModuleEnvironment(spec: string, opts: EnvironmentOptions = {}): Promise<Environment> {
  const where = `env.module ${spec}`;
  const exported = await loadModuleExport(spec, "env.module");
  let value = exported;
  if (typeof exported === "function") {
    try {
      value = await (exported as (o: EnvironmentOptions) => unknown)(opts);
    } catch (e) {
      throw new ArborError(`${where}: the factory threw: ${(e instanceof Error ? e.message : String(e)).split("\n")[0]}`, "config");
    }
  }
  return checkEnvironmentShape(value, where);
}
