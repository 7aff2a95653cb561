// Agent tools: a name, a description, a zod schema of the input and a run function working in the
// program's sandbox. The schema gives both the JSON Schema declared to native tool-calling models
// and the validation of whatever the model wrote. Environment tools (raw text input) adapt in.
import { z } from "../core/zod.js";
import type { Tool } from "./tool.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { mentionsOutOfMemory } from "./sandbox-outcome.js";

/** What a tool run sees besides its input. */
export interface ToolContext {
  sandbox: Sandbox;
  programId: string;
  /** Index of the call whose answer requested this tool. */
  callIndex: number;
  /** Aborted when the episode ends early (wall time, abort): long tools should stop. */
  signal: AbortSignal;
}

export interface AgentToolResult {
  output: string;
  /** False when the tool failed; the model still sees `output`. */
  ok: boolean;
  /** The tool's process crashed or was killed: ends the episode as `tool_crash`. */
  crashed?: boolean;
  /** The sandbox's memory limit stopped it: ends the episode as `sandbox_oom`. */
  oom?: boolean;
}

export interface AgentTool<I = unknown> {
  readonly name: string;
  readonly description: string;
  readonly input: z.ZodType<I>;
  /** A string result means success with that output. Throw {@link AgentStop} to end the episode with a given kind. */
  run(input: I, ctx: ToolContext): Promise<AgentToolResult | string>;
}

const TOOL_NAME = /^[A-Za-z_][\w-]{0,63}$/;

/** Declare a tool; its input is validated against `input` before `run` sees it. */
export function defineTool<S extends z.ZodType>(t: {
  name: string;
  description: string;
  input: S;
  run(input: z.output<S>, ctx: ToolContext): Promise<AgentToolResult | string>;
}): AgentTool<z.output<S>> {
  if (!TOOL_NAME.test(t.name)) throw new Error(`defineTool: invalid tool name '${t.name}' (letters, digits, _ and -, at most 64)`);
  return { name: t.name, description: t.description, input: t.input as unknown as z.ZodType<z.output<S>>, run: t.run };
}

/** An environment tool as an agent tool: its input is the raw argument text. */
export function fromEnvTool(tool: Tool): AgentTool<string> {
  return defineTool({
    name: tool.name,
    description: tool.description,
    input: z.string().describe("the argument text"),
    async run(input, ctx) {
      const r = await tool.run(input, ctx.sandbox);
      // Environment tools have no memory verdict of their own: a crash reporting OOM is one.
      const oom = r.crashed === true && mentionsOutOfMemory(r.output);
      return { output: r.output, ok: r.ok, ...(r.crashed ? { crashed: true } : {}), ...(oom ? { oom: true } : {}) };
    },
  });
}

/** The JSON Schema of a tool's arguments object, and whether a non-object input was wrapped as `{input}`. */
export function toolParameters(tool: AgentTool): { parameters: Record<string, unknown>; wrapped: boolean } {
  const schema = z.toJSONSchema(tool.input) as Record<string, unknown>;
  delete schema.$schema;
  // Function arguments are always a JSON object: other inputs travel as its `input` field.
  if (schema.type === "object") return { parameters: schema, wrapped: false };
  return { parameters: { type: "object", properties: { input: schema }, required: ["input"], additionalProperties: false }, wrapped: true };
}

/**
 * Validate what the model wrote for `tool`. `json`: native tool-call arguments (a JSON object);
 * otherwise markup text, which is the input itself for string tools, or JSON for the others.
 */
export function parseToolInput(tool: AgentTool, text: string, json: boolean): { ok: true; value: unknown } | { ok: false; error: string } {
  const { wrapped } = toolParameters(tool);
  const candidates: unknown[] = [];
  // Markup text is the input itself only for tools whose input is not an object.
  if (!json && wrapped) candidates.push(text);
  let parsed: unknown;
  let jsonError: string | undefined;
  try {
    parsed = JSON.parse(text === "" && !wrapped ? "{}" : text);
    candidates.push(wrapped && isRecord(parsed) && "input" in parsed ? parsed.input : parsed);
  } catch (e) {
    jsonError = e instanceof Error ? e.message : String(e);
  }
  let firstIssue: string | undefined;
  for (const c of candidates) {
    const r = tool.input.safeParse(c);
    if (r.success) return { ok: true, value: r.data };
    firstIssue ??= r.error.issues.map((i) => `${i.path.length > 0 ? i.path.join(".") : "input"}: ${i.message}`).join("; ");
  }
  if (candidates.length === 0) return { ok: false, error: `arguments are not JSON (${jsonError ?? "?"})` };
  return { ok: false, error: firstIssue ?? "invalid input" };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
