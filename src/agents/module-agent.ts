// A user's white-box agent from a module (`agent.module: ./my-agent.ts` or `./agents.mjs#careful`), like
// `env.module` and `reward.custom`: the export is an agent definition (define-agent.ts's `AgentDefinition`) or a
// factory given Arbor's own definition for the run (the environment's tools, the tool-call mode, the config's
// limits and context policy) that returns one — typically that definition with changes (an `onAnswer` that goes
// on, other limits, fewer tools). Its shape is checked on load, and `defineAgent` checks the rest (tool names,
// limits), so a wrong module stops the run before it starts with one line naming what is wrong.
import { ArborError } from "../core/errors.js";
import { loadModuleExport } from "../core/load-module.js";
import { defineAgent, type AgentDefinition } from "./define-agent.js";

/** What an `agent.module` factory export is called with and returns. */
export type AgentModuleFactory = (base: AgentDefinition) => AgentDefinition | Promise<AgentDefinition>;

/** `value` as an agent definition, or an {@link ArborError} naming the member that is wrong. */
export function checkAgentDefinition(value: unknown, where: string): AgentDefinition {
  const bad = (why: string): never => {
    throw new ArborError(`agent.module ${where}: not an agent definition: ${why}`, "config");
  };
  if (typeof value !== "object" || value === null) return bad(`got ${value === null ? "null" : typeof value}`);
  const d = value as Record<string, unknown>;
  if (typeof d.name !== "string" || d.name === "") bad(`'name' must be a non-empty string (got ${typeof d.name})`);
  if (!Array.isArray(d.tools)) bad(`'tools' must be an array (got ${typeof d.tools})`);
  (d.tools as unknown[]).forEach((t, i) => {
    const tool = t as Record<string, unknown> | null;
    if (typeof tool !== "object" || tool === null || typeof tool.name !== "string" || typeof tool.run !== "function" || typeof tool.input !== "object") {
      bad(`tools[${i}] must be an agent tool ({name, description, input, run})`);
    }
  });
  if (typeof d.limits !== "object" || d.limits === null) bad(`'limits' must be an object (got ${typeof d.limits})`);
  if (d.onAnswer !== undefined && typeof d.onAnswer !== "function") bad(`'onAnswer' must be a function (got ${typeof d.onAnswer})`);
  const def = value as AgentDefinition;
  try {
    // Tool names, the tool-call mode and the limits, as for any agent.
    defineAgent(def);
  } catch (e) {
    bad(e instanceof Error ? e.message : String(e));
  }
  return def;
}

/** Modules' exports kept loaded (every program of a run asks for its one module; tsx would evaluate it again each time). */
const MAX_CACHED_MODULES = 16;
const loaded = new Map<string, Promise<unknown>>();

function exportOf(spec: string): Promise<unknown> {
  let p = loaded.get(spec);
  if (p === undefined) {
    p = loadModuleExport(spec, "agent.module");
    // A failed load is not kept: a fixed file loads on the next ask.
    p.catch(() => loaded.delete(spec));
    if (loaded.size >= MAX_CACHED_MODULES) loaded.delete(loaded.keys().next().value as string);
    loaded.set(spec, p);
  }
  return p;
}

/** The agent definition of `spec` (path or path#export, absolute or relative to the working directory), given Arbor's `base`. */
export async function loadModuleAgent(spec: string, base: AgentDefinition): Promise<AgentDefinition> {
  const exported = await exportOf(spec);
  let value: unknown = exported;
  if (typeof exported === "function") {
    try {
      value = await (exported as AgentModuleFactory)(base);
    } catch (e) {
      throw new ArborError(`agent.module ${spec}: the factory threw: ${e instanceof Error ? e.message : String(e)}`, "config");
    }
  }
  return checkAgentDefinition(value, spec);
}
