// The rollout's tool loop: environment tools, the text markup (the tiny policy) or native tool calls,
// limits on turns and tokens — now one configuration of the agent SDK (define-agent.ts).
import type OpenAI from "openai";
import type { Clock } from "../core/clock.js";
import type { ChatMessage } from "../core/types.js";
import type { Tool } from "./tool.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { fromEnvTool } from "./agent-tool.js";
import type { ContextPolicy } from "./context/context-policy.js";
import { defineAgent, type AgentDefinition, type AgentLimits, type AgentOutcome } from "./define-agent.js";
import { loadModuleAgent } from "./module-agent.js";
import type { ToolCallMode } from "./tool-modes.js";

export type { AgentLimits, AgentOutcome } from "./define-agent.js";

export interface ToolAgentOptions {
  client: OpenAI;
  model: string;
  programId: string;
  /** Opening conversation (system + user). */
  messages: ChatMessage[];
  tools: Tool[];
  sandbox: Sandbox;
  limits: AgentLimits;
  temperature: number;
  /** Base sampling seed; call i uses seed + i so a program reproduces. */
  seed?: number;
  clock: Clock;
  signal?: AbortSignal;
  /** Context management (default none). */
  context?: ContextPolicy;
  /** How the model calls tools (default "markup": the tiny policy's text markup). */
  toolMode?: ToolCallMode;
  /** Asked after every round of tool calls; a string ends the episode as `hygiene_violation`. */
  checkHygiene?: () => string | undefined | Promise<string | undefined>;
  /** A user's agent module (`agent.module`, module-agent.ts), given this loop's definition to change. */
  module?: string;
}

/** Run one episode of the tool loop. Never throws for agent, tool or engine failures: they end the episode. */
export async function runToolAgent(o: ToolAgentOptions): Promise<AgentOutcome> {
  const base: AgentDefinition = {
    name: "tool-agent",
    tools: o.tools.map(fromEnvTool),
    toolMode: o.toolMode ?? "markup",
    limits: o.limits,
    ...(o.context ? { context: o.context } : {}),
  };
  const agent = defineAgent(o.module !== undefined ? await loadModuleAgent(o.module, base) : base);
  return agent.run({
    client: o.client,
    model: o.model,
    programId: o.programId,
    messages: o.messages,
    sandbox: o.sandbox,
    clock: o.clock,
    temperature: o.temperature,
    ...(o.seed === undefined ? {} : { seed: o.seed }),
    ...(o.signal ? { signal: o.signal } : {}),
    ...(o.checkHygiene ? { checkHygiene: o.checkHygiene } : {}),
  });
}
