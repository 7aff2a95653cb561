// White-box tool-calling agent loop v0: talks to the gateway with the official `openai` client,
// parses tool calls written in Arbor's text markup, runs tools in the program's sandbox, and ends
// every episode in exactly one recorded Termination.
import OpenAI from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import type { Clock } from "../core/clock.js";
import type { ChatMessage, Termination, ToolEvent } from "../core/types.js";
import type { Tool } from "../envs/env.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { parseToolCalls } from "./markup.js";

export interface AgentLimits {
  /** Model calls per episode. */
  maxTurns: number;
  /** `max_tokens` of one call. */
  maxTokensPerCall: number;
  /** Generated tokens over the whole episode. */
  maxTotalTokens: number;
}

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
}

export interface AgentOutcome {
  termination: Termination;
  /** The whole conversation, including assistant and tool turns. */
  messages: ChatMessage[];
  /** Text of the last assistant message with tool calls removed. */
  finalAnswer: string;
  tools: ToolEvent[];
  calls: number;
  generatedTokens: number;
}

/** Run one episode of the tool loop. Never throws for agent, tool or engine failures: they end the episode. */
export async function runToolAgent(o: ToolAgentOptions): Promise<AgentOutcome> {
  const messages: ChatMessage[] = [...o.messages];
  const tools: ToolEvent[] = [];
  const byName = new Map(o.tools.map((t) => [t.name, t]));
  let generated = 0;
  let calls = 0;
  let finalAnswer = "";
  const end = (termination: Termination): AgentOutcome => ({
    termination,
    messages,
    finalAnswer,
    tools,
    calls,
    generatedTokens: generated,
  });

  for (let turn = 0; turn < o.limits.maxTurns; turn++) {
    if (o.signal?.aborted) return end({ kind: "aborted", detail: String(o.signal.reason ?? "aborted") });
    const budget = o.limits.maxTotalTokens - generated;
    if (budget <= 0) return end({ kind: "max_tokens", detail: `${generated} tokens generated` });

    let content: string;
    try {
      const res = await o.client.chat.completions.create(
        {
          model: o.model,
          messages: messages.map(toOpenAiMessage),
          max_tokens: Math.min(o.limits.maxTokensPerCall, budget),
          temperature: o.temperature,
          ...(o.seed === undefined ? {} : { seed: o.seed + turn }),
        },
        { signal: o.signal },
      );
      calls++;
      generated += res.usage?.completion_tokens ?? 0;
      content = res.choices[0]?.message.content ?? "";
    } catch (e) {
      if (o.signal?.aborted) return end({ kind: "aborted", detail: String(o.signal.reason ?? "aborted") });
      return end({ kind: "engine_error", detail: errorMessage(e) });
    }
    messages.push({ role: "assistant", content });

    const parsed = parseToolCalls(content);
    finalAnswer = parsed.rest;
    if (parsed.calls.length === 0 && parsed.malformed.length === 0) return end({ kind: "completed" });

    for (const bad of parsed.malformed) {
      messages.push({ role: "tool", name: "error", content: `malformed tool call: ${truncate(bad, 80)}` });
    }
    for (const call of parsed.calls) {
      const tool = byName.get(call.name);
      const started = o.clock.now();
      if (!tool) {
        const known = [...byName.keys()].join(", ");
        const output = `unknown tool '${call.name}' (known: ${known})`;
        tools.push({ programId: o.programId, callIndex: calls - 1, tool: call.name, input: call.input, output, ok: false, durationMs: 0 });
        messages.push({ role: "tool", name: call.name, content: output });
        continue;
      }
      try {
        const r = await tool.run(call.input, o.sandbox);
        tools.push({ programId: o.programId, callIndex: calls - 1, tool: call.name, input: call.input, output: r.output, ok: r.ok, durationMs: o.clock.now() - started });
        messages.push({ role: "tool", name: call.name, content: r.output });
        if (r.crashed) return end({ kind: "tool_crash", detail: `${call.name}: ${r.output}` });
      } catch (e) {
        // A tool that throws has lost its sandbox or its process, like one that reports a crash: end the episode.
        const output = errorMessage(e);
        tools.push({ programId: o.programId, callIndex: calls - 1, tool: call.name, input: call.input, output, ok: false, durationMs: o.clock.now() - started });
        return end({ kind: "tool_crash", detail: `${call.name}: ${output}` });
      }
    }
  }
  return end({ kind: "max_turns", detail: `${o.limits.maxTurns} turns` });
}

function toOpenAiMessage(m: ChatMessage, i: number): ChatCompletionMessageParam {
  if (m.role === "tool") return { role: "tool", content: m.content, tool_call_id: `call_${i}` };
  return { role: m.role, content: m.content };
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function truncate(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n)}…`;
}
