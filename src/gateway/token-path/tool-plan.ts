// How the token path reads a chat request's tools: the same plan the built-in engine makes
// (src/model/tool-markup.ts), from a body the gateway has not shape-checked yet. The backend's
// tool-call parser then reads the calls (answer-plan.ts); backends without one take tool requests
// through the passthrough (usesTokenPath). The engine validates the tools again when it renders them.
import { planTools, ToolChoiceError, type ToolFields, type ToolPlan } from "../../model/tool-markup.js";
import { InvalidRequestError } from "../http-errors.js";

/** Whether a chat body declares at least one tool. */
export function declaresTools(body: Record<string, unknown>): boolean {
  return Array.isArray(body.tools) && body.tools.length > 0;
}

/** The tool plan of a chat body (undefined without tools); a 400 naming the field for a malformed one. */
export function requestToolPlan(body: Record<string, unknown>): ToolPlan | undefined {
  const tools = body.tools;
  if (tools !== undefined && tools !== null) {
    if (!Array.isArray(tools)) throw new InvalidRequestError("tools", "must be a list of function tools");
    tools.forEach((t, i) => {
      const at = `tools[${i}]`;
      const tool = t as { type?: unknown; function?: { name?: unknown; description?: unknown; parameters?: unknown } } | null;
      if (typeof tool !== "object" || tool === null || tool.type !== "function") throw new InvalidRequestError(`${at}.type`, "only function tools are supported");
      const fn = tool.function;
      if (typeof fn !== "object" || fn === null) throw new InvalidRequestError(`${at}.function`, "must be an object");
      if (typeof fn.name !== "string" || !/^[A-Za-z_][\w-]*$/.test(fn.name)) {
        throw new InvalidRequestError(`${at}.function.name`, "must be letters, digits, _ or - (not starting with a digit or -)");
      }
      if (fn.description != null && typeof fn.description !== "string") throw new InvalidRequestError(`${at}.function.description`, "must be a string");
      if (fn.parameters != null && (typeof fn.parameters !== "object" || Array.isArray(fn.parameters))) {
        throw new InvalidRequestError(`${at}.function.parameters`, "must be a JSON Schema object");
      }
    });
  }
  const choice = body.tool_choice;
  const named = (c: unknown): boolean => {
    const o = c as { type?: unknown; function?: { name?: unknown } } | null;
    return typeof o === "object" && o !== null && o.type === "function" && typeof o.function?.name === "string" && o.function.name !== "";
  };
  if (choice != null && choice !== "none" && choice !== "auto" && choice !== "required" && !named(choice)) {
    throw new InvalidRequestError("tool_choice", 'must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}');
  }
  if (body.parallel_tool_calls != null && typeof body.parallel_tool_calls !== "boolean") throw new InvalidRequestError("parallel_tool_calls", "must be a boolean");
  try {
    return planTools(body as ToolFields);
  } catch (e) {
    if (e instanceof ToolChoiceError) throw new InvalidRequestError(e.field, e.reason);
    throw e;
  }
}
