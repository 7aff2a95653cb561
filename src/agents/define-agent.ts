// The white-box agent SDK: `defineAgent` declares tools (zod schemas), how the model calls them
// (native OpenAI tool calls or the tiny policy's markup), limits (turns, tokens, wall time through
// the injected Clock) and a context policy; `run` plays one episode against the program's gateway
// endpoint. Several calls in one answer run concurrently and are fed back in order. Every episode
// ends in exactly one Termination; context changes are returned as events for the trajectory.
import OpenAI from "openai";
import type { Clock } from "../core/clock.js";
import type { ChatMessage, ContextEvent, Termination, ToolEvent } from "../core/types.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { toOpenAiMessages, type AgentMessage } from "./agent-message.js";
import { AgentStop } from "./agent-stop.js";
import { parseToolInput, type AgentTool, type AgentToolResult, type ToolContext } from "./agent-tool.js";
import type { ContextPolicy, ContextTrigger } from "./context/context-policy.js";
import { TokenMeter } from "./token-meter.js";
import { nativeToolSpecs, parseAnswer, TOOL_CALL_MODES, type RequestedCall, type ToolCallMode } from "./tool-modes.js";

export interface AgentLimits {
  /** Model calls the agent makes per episode (a summarizer's calls not included). */
  maxTurns: number;
  /** `max_tokens` of one call. */
  maxTokensPerCall: number;
  /** Generated tokens over the whole episode (a summarizer's included). */
  maxTotalTokens: number;
  /** Wall time of the episode, ms of the injected clock (default: no limit). */
  maxWallMs?: number;
  /** Tool calls of one answer run at once at most (default 8). */
  maxParallelTools?: number;
  /** Longest tool output fed back to the model, characters (default 16384; the rest is cut with a marker). */
  maxToolOutputChars?: number;
}

export interface AgentDefinition {
  name: string;
  // Tools of any input type: each validates its own input before running.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  tools: readonly AgentTool<any>[];
  toolMode: ToolCallMode;
  limits: AgentLimits;
  /** Context management (default: none). */
  context?: ContextPolicy;
  /**
   * Called when an answer makes no tool call. Return a new user message to go on (multi-turn
   * tasks, environment feedback), or undefined to finish the episode as `completed`.
   */
  onAnswer?: (answer: string, turn: number) => string | undefined | Promise<string | undefined>;
}

export interface AgentRunOptions {
  /** An OpenAI client on the program's endpoint (`/p/{programId}/v1`) with the program's key. */
  client: OpenAI;
  model: string;
  programId: string;
  /** Opening conversation (system + user). */
  messages: ChatMessage[];
  sandbox: Sandbox;
  clock: Clock;
  /** Sampling temperature (default 1). */
  temperature?: number;
  /** Base sampling seed; call i uses seed + i so a program reproduces. */
  seed?: number;
  signal?: AbortSignal;
  /**
   * Asked after every round of tool calls (e.g. the environment's hygiene monitor): a string
   * describes a violation and ends the episode as `hygiene_violation`.
   */
  checkHygiene?: () => string | undefined | Promise<string | undefined>;
}

export interface AgentOutcome {
  termination: Termination;
  /** The whole conversation as it stands at the end (after any context change). */
  messages: AgentMessage[];
  /** Text of the last assistant message with tool calls removed. */
  finalAnswer: string;
  tools: ToolEvent[];
  contextEvents: ContextEvent[];
  /** Model calls made (the summarizer's included): the program's call count at the gateway. */
  calls: number;
  /** Agent turns (model calls of the loop itself). */
  turns: number;
  generatedTokens: number;
}

export interface Agent {
  readonly definition: AgentDefinition;
  /** Play one episode. Never throws for agent, tool or engine failures: they end the episode. */
  run(o: AgentRunOptions): Promise<AgentOutcome>;
}

/** Declare an agent; throws on invalid tools or limits. */
export function defineAgent(def: AgentDefinition): Agent {
  if (!TOOL_CALL_MODES.includes(def.toolMode)) throw new Error(`defineAgent ${def.name}: toolMode must be one of ${TOOL_CALL_MODES.join(", ")}, got '${def.toolMode}'`);
  const names = new Set<string>();
  for (const t of def.tools) {
    if (names.has(t.name)) throw new Error(`defineAgent ${def.name}: two tools named '${t.name}'`);
    names.add(t.name);
  }
  const l = def.limits;
  for (const [k, v] of Object.entries({ maxTurns: l.maxTurns, maxTokensPerCall: l.maxTokensPerCall, maxTotalTokens: l.maxTotalTokens, maxParallelTools: l.maxParallelTools ?? 1, maxToolOutputChars: l.maxToolOutputChars ?? 1 })) {
    if (!(Number.isInteger(v) && v > 0)) throw new Error(`defineAgent ${def.name}: limits.${k} must be a positive integer, got ${v}`);
  }
  if (l.maxWallMs !== undefined && !(l.maxWallMs > 0)) throw new Error(`defineAgent ${def.name}: limits.maxWallMs must be > 0, got ${l.maxWallMs}`);
  return { definition: def, run: (o) => new Episode(def, o).run() };
}

interface ToolRun {
  event: ToolEvent;
  message: AgentMessage;
  stop?: Termination;
}

/** One episode's state. */
class Episode {
  private readonly messages: AgentMessage[];
  private readonly initial: AgentMessage[];
  private readonly tools: ToolEvent[] = [];
  private readonly contextEvents: ContextEvent[] = [];
  private readonly byName: Map<string, AgentTool>;
  private readonly meter = new TokenMeter();
  /** Aborted when the episode must stop early (wall time, caller's abort). */
  private readonly stop = new AbortController();
  private stopReason: Termination | undefined;
  private calls = 0;
  private turns = 0;
  private generated = 0;
  private finalAnswer = "";

  constructor(
    private readonly def: AgentDefinition,
    private readonly o: AgentRunOptions,
  ) {
    this.messages = o.messages.map((m) => ({ ...m }));
    this.initial = [...this.messages];
    this.byName = new Map(def.tools.map((t) => [t.name, t as AgentTool]));
  }

  private halt(t: Termination): void {
    if (this.stopReason) return;
    this.stopReason = t;
    this.stop.abort(new Error(t.detail ?? t.kind));
  }

  async run(): Promise<AgentOutcome> {
    const { clock, signal } = this.o;
    const wallMs = this.def.limits.maxWallMs;
    const timer = wallMs === undefined ? undefined : clock.setTimer(wallMs, () => this.halt(wallTermination(wallMs)));
    const onAbort = (): void => this.halt({ kind: "aborted", detail: String(signal?.reason ?? "aborted") });
    if (signal?.aborted) onAbort();
    else signal?.addEventListener("abort", onAbort, { once: true });
    const started = clock.now();
    try {
      return this.end(await this.loop(started));
    } catch (e) {
      // A bug in a hook or policy: the episode still ends with a recorded outcome.
      return this.end(this.stopReason ?? { kind: "agent_error", detail: errorMessage(e) });
    } finally {
      timer?.cancel();
      signal?.removeEventListener("abort", onAbort);
    }
  }

  private async loop(started: number): Promise<Termination> {
    const l = this.def.limits;
    for (;;) {
      if (l.maxWallMs !== undefined && this.o.clock.now() - started >= l.maxWallMs) this.halt(wallTermination(l.maxWallMs));
      if (this.stopReason) return this.stopReason;
      if (this.turns >= l.maxTurns) return { kind: "max_turns", detail: `${l.maxTurns} turns` };
      if (l.maxTotalTokens - this.generated <= 0) return { kind: "max_tokens", detail: `${this.generated} tokens generated` };

      const failed = await this.manageContext("before-call");
      if (failed) return failed;
      const budget = l.maxTotalTokens - this.generated;
      if (budget <= 0) return { kind: "max_tokens", detail: `${this.generated} tokens generated` };

      let answer: OpenAI.Chat.Completions.ChatCompletionMessage;
      const sent = [...this.messages];
      let usage: { prompt: number; completion: number };
      try {
        const r = await this.complete(sent, Math.min(l.maxTokensPerCall, budget), true);
        answer = r.message;
        usage = r.usage;
      } catch (e) {
        return this.callFailure(e);
      }
      this.turns++;
      const parsed = parseAnswer(this.def.toolMode, answer, this.calls - 1);
      this.meter.observe(sent, parsed.assistant, usage.prompt, usage.completion);
      this.messages.push(parsed.assistant);
      this.finalAnswer = parsed.text;

      if (parsed.calls.length === 0 && parsed.malformed.length === 0) {
        const next = this.def.onAnswer ? await this.def.onAnswer(parsed.text, this.turns) : undefined;
        if (next === undefined) return { kind: "completed" };
        this.messages.push({ role: "user", content: next });
        const bad = await this.manageContext("user-message");
        if (bad) return bad;
        continue;
      }
      for (const m of parsed.malformed) {
        this.messages.push({ role: "tool", name: "error", content: `malformed tool call: ${truncate(m, 80)}` });
      }
      const stopped = await this.runTools(parsed.calls);
      if (stopped) return stopped;
      const violation = this.o.checkHygiene ? await this.o.checkHygiene() : undefined;
      if (violation !== undefined) return { kind: "hygiene_violation", detail: violation };
    }
  }

  /** One model call through the program's endpoint; counts the call and its tokens. */
  private async complete(
    messages: AgentMessage[],
    maxTokens: number,
    withTools: boolean,
  ): Promise<{ message: OpenAI.Chat.Completions.ChatCompletionMessage; usage: { prompt: number; completion: number } }> {
    const o = this.o;
    const index = this.calls;
    const native = withTools && this.def.toolMode === "native" && this.def.tools.length > 0;
    const res = await o.client.chat.completions.create(
      {
        model: o.model,
        messages: toOpenAiMessages(messages),
        max_tokens: maxTokens,
        temperature: o.temperature ?? 1,
        ...(o.seed === undefined ? {} : { seed: o.seed + index }),
        ...(native ? { tools: nativeToolSpecs(this.def.tools as AgentTool[]) } : {}),
      },
      { signal: this.stop.signal },
    );
    this.calls++;
    const usage = { prompt: res.usage?.prompt_tokens ?? 0, completion: res.usage?.completion_tokens ?? 0 };
    this.generated += usage.completion;
    const message = res.choices[0]?.message ?? { role: "assistant" as const, content: "", refusal: null };
    return { message, usage };
  }

  /** The termination for a failed model call. */
  private callFailure(e: unknown): Termination {
    if (this.stopReason) return this.stopReason;
    if (e instanceof OpenAI.APIError && e.code === "context_length_exceeded") return { kind: "context_overflow", detail: e.message };
    return { kind: "engine_error", detail: errorMessage(e) };
  }

  /** Let the context policy act; records the change. Returns a termination if it failed. */
  private async manageContext(trigger: ContextTrigger): Promise<Termination | undefined> {
    const policy = this.def.context;
    if (!policy) return undefined;
    const before = [...this.messages];
    const tokensBefore = this.meter.count(before);
    let change;
    try {
      change = await policy.apply({
        trigger,
        messages: before,
        initial: this.initial,
        tokens: tokensBefore,
        callIndex: this.calls,
        countTokens: (m) => this.meter.count(m),
        signal: this.stop.signal,
        complete: async (messages, maxTokens) => {
          const budget = this.def.limits.maxTotalTokens - this.generated;
          if (budget <= 0) throw new BudgetSpent(this.generated);
          const r = await this.complete(messages, Math.min(maxTokens, budget), false);
          return { text: r.message.content ?? "", completionTokens: r.usage.completion };
        },
      });
    } catch (e) {
      if (e instanceof BudgetSpent) return { kind: "max_tokens", detail: `${e.generated} tokens generated` };
      if (e instanceof OpenAI.APIError || this.stopReason) return this.callFailure(e);
      return { kind: "agent_error", detail: `context policy ${policy.name}: ${errorMessage(e)}` };
    }
    if (!change) return undefined;
    this.messages.splice(0, this.messages.length, ...change.messages);
    const ev: ContextEvent = {
      programId: this.o.programId,
      callIndex: this.calls,
      policy: policy.name,
      action: change.action,
      tokensBefore,
      tokensAfter: this.meter.count(this.messages),
      messagesBefore: before.length,
      messagesAfter: this.messages.length,
    };
    if (change.detail !== undefined) ev.detail = change.detail;
    this.contextEvents.push(ev);
    return undefined;
  }

  /** Run one answer's calls concurrently (bounded); feed results back in call order. */
  private async runTools(calls: RequestedCall[]): Promise<Termination | undefined> {
    const callIndex = this.calls - 1;
    const done: (ToolRun | undefined)[] = calls.map(() => undefined);
    const limit = this.def.limits.maxParallelTools ?? 8;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < calls.length && !this.stopReason) {
        const i = next++;
        done[i] = await this.runTool(calls[i] as RequestedCall, callIndex);
      }
    };
    const all = Promise.all(Array.from({ length: Math.min(limit, calls.length) }, worker));
    // A tool still running when the episode is stopped is abandoned (its sandbox goes with the program).
    all.catch(() => undefined);
    await untilAborted(all, this.stop.signal);
    let stop: Termination | undefined;
    for (const r of done) {
      if (!r) continue;
      this.tools.push(r.event);
      this.messages.push(r.message);
      stop ??= r.stop;
    }
    return this.stopReason ?? stop;
  }

  private async runTool(call: RequestedCall, callIndex: number): Promise<ToolRun> {
    const started = this.o.clock.now();
    const finish = (output: string, ok: boolean, stop?: Termination): ToolRun => {
      const max = this.def.limits.maxToolOutputChars ?? 16_384;
      const shown = output.length <= max ? output : `${output.slice(0, max)}\n[… ${output.length - max} more characters cut]`;
      const event: ToolEvent = { programId: this.o.programId, callIndex, tool: call.name, input: call.input, output, ok, durationMs: this.o.clock.now() - started };
      return { event, message: { role: "tool", name: call.name, content: shown, toolCallId: call.id }, ...(stop ? { stop } : {}) };
    };
    const tool = this.byName.get(call.name);
    if (!tool) return finish(`unknown tool '${call.name}' (known: ${[...this.byName.keys()].join(", ")})`, false);
    const input = parseToolInput(tool, call.input, this.def.toolMode === "native");
    if (!input.ok) return finish(`invalid arguments for ${call.name}: ${input.error}`, false);
    const ctx: ToolContext = { sandbox: this.o.sandbox, programId: this.o.programId, callIndex, signal: this.stop.signal };
    let r: AgentToolResult;
    try {
      const out = await tool.run(input.value, ctx);
      r = typeof out === "string" ? { output: out, ok: true } : out;
    } catch (e) {
      if (e instanceof AgentStop) return finish(e.detail, false, { kind: e.kind, detail: `${call.name}: ${e.detail}` });
      // A tool that throws has lost its sandbox or its process, like one that reports a crash.
      const why = errorMessage(e);
      return finish(why, false, { kind: "tool_crash", detail: `${call.name}: ${why}` });
    }
    if (r.oom) return finish(r.output, false, { kind: "sandbox_oom", detail: `${call.name}: ${r.output}` });
    if (r.crashed) return finish(r.output, false, { kind: "tool_crash", detail: `${call.name}: ${r.output}` });
    return finish(r.output, r.ok);
  }

  private end(termination: Termination): AgentOutcome {
    return {
      termination,
      messages: this.messages,
      finalAnswer: this.finalAnswer,
      tools: this.tools,
      contextEvents: this.contextEvents,
      calls: this.calls,
      turns: this.turns,
      generatedTokens: this.generated,
    };
  }
}

class BudgetSpent extends Error {
  constructor(readonly generated: number) {
    super(`token budget spent (${generated} generated)`);
  }
}

function wallTermination(ms: number): Termination {
  return { kind: "timeout", detail: `wall time limit of ${ms} ms reached` };
}

/** Wait for `work`, or only until `signal` aborts (the listener is removed either way). */
async function untilAborted(work: Promise<unknown>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return;
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<void>((resolve) => {
    onAbort = () => resolve();
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    await Promise.race([work.then(() => undefined), stopped]);
  } finally {
    if (onAbort) signal.removeEventListener("abort", onAbort);
  }
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function truncate(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n)}…`;
}
