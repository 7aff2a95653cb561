// Shared domain types: the vocabulary every module speaks (programs, calls, trajectories, groups).
// Token-in/token-out: calls carry the exact token ids and logprobs the engine reported.

/** A policy version: which weights produced a token. Monotonic per run. */
export interface PolicyVersion {
  /** Monotonic version number (0 = initial weights). */
  id: number;
  /** Where the weights live (a GGUF path for llama.cpp engines). */
  modelPath: string;
}

/** Why a program ended. Every program ends in exactly one recorded termination. */
export type TerminationKind =
  | "completed" // the agent gave a final answer
  | "max_turns"
  | "max_tokens"
  | "context_overflow"
  | "tool_crash" // a tool process crashed or was killed by a limit
  | "agent_error" // the agent loop threw
  | "engine_error" // the engine or gateway failed the call
  | "sandbox_error"
  | "timeout" // a wall-time limit (of the episode or of one exec) was reached
  | "aborted"
  | "sandbox_oom" // the sandbox's memory limit killed the agent or one of its tools
  | "hygiene_violation"; // the agent touched test or grader paths it must never see

export interface Termination {
  kind: TerminationKind;
  /** Human-readable detail (error message, limit hit). */
  detail?: string;
}

export type ProgramState = "active" | "paused" | "terminated";

/** One agent episode across many LLM calls and tool calls (ThunderAgent's program). */
export interface Program {
  id: string;
  runId: string;
  taskId: string;
  groupId: string;
  /** Index of this sample within its group (0..n-1). */
  sampleIndex: number;
  state: ProgramState;
  createdAt: number;
  endedAt?: number;
  termination?: Termination;
  /** The environment variant or perturbation this program was sampled into (by seed), if any. */
  variant?: { id: string; kind: "variant" | "perturbation" };
}

export type ChatRole = "system" | "user" | "assistant" | "tool";

export interface ChatMessage {
  role: ChatRole;
  content: string;
  /** For tool messages: the name of the tool that produced the content. */
  name?: string;
  /** For assistant messages: the tool calls the turn made (OpenAI `tool_calls`), after its content. */
  toolCalls?: MessageToolCall[];
  /** For tool messages: the id of the call this message answers (OpenAI `tool_call_id`). */
  toolCallId?: string;
  /**
   * For assistant messages: the reasoning the model wrote before its answer (vLLM's
   * `reasoning_content`, split out of `<think>…</think>`); templates decide whether to re-render it.
   */
  reasoning?: string;
}

/** One tool call of an assistant message; `arguments` is the JSON text as the model wrote it. */
export interface MessageToolCall {
  id: string;
  name: string;
  arguments: string;
}

export type FinishReason = "stop" | "length" | "abort" | "error";

/** Timings of one call, in ms of the gateway's clock. */
export interface CallTimings {
  start: number;
  end: number;
}

/** One LLM call of a program, exactly as the engine computed it. */
/** A clamped output budget: what the client asked for and what the context left it. */
export interface MaxTokensClamp {
  asked: number;
  granted: number;
}

export interface Call {
  id: string;
  programId: string;
  /** Position of the call within the program (0-based). */
  index: number;
  messages: ChatMessage[];
  promptTokenIds: number[];
  outputTokenIds: number[];
  /** Logprob of each output token under the behaviour policy (same length as outputTokenIds). */
  logprobs: number[];
  outputText: string;
  finishReason: FinishReason;
  backend: string;
  /** The model name the backend served the call as (its configured name), whatever the client sent. */
  servedModel?: string;
  /**
   * The model name the client asked for (its `model` field), kept as sent: black-box agents name
   * their vendor's models, and the gateway serves them with the program's backend whatever they ask.
   * Absent: the client sent no model name (or the call predates the field).
   */
  requestedModel?: string;
  /**
   * The client asked for more output tokens than the context leaves (context length minus prompt)
   * and the gateway clamped the request to what it leaves (`gateway.maxTokensPolicy: clamp`).
   * Absent: the request was served as asked.
   */
  maxTokensClamped?: MaxTokensClamp;
  policyVersion: number;
  /**
   * The weights version of each output token (same length as outputTokenIds), when they differ:
   * an engine that switched weights mid-call (`in_flight: resume`) made the early tokens on the old
   * weights. Absent = every output token is at `policyVersion`.
   */
  tokenPolicyVersions?: number[];
  timings: CallTimings;
  /**
   * False for a text-only call (a generic OpenAI backend without token ids): its token fields are
   * empty and it must never be trained on. Absent = trainable.
   */
  trainable?: false;
  /**
   * True when the client did not extend the program's previous conversation (it edited or dropped
   * history), so the gateway tokenized the whole conversation afresh instead of continuing from
   * the previous call's prompt and output ids. Absent = continued (or the program's first call).
   */
  contextReset?: true;
  /**
   * Why the call did not continue the previous context (only with `contextReset`), e.g.
   * "history differs", "tools changed", "template re-renders earlier turns", "answer differs from
   * the engine's output", "cut-off answer's turn ending unknown".
   */
  contextResetReason?: string;
}

/** A tool invocation made by an agent between calls. */
export interface ToolEvent {
  programId: string;
  /** Index of the call whose output requested the tool. */
  callIndex: number;
  tool: string;
  input: string;
  output: string;
  ok: boolean;
  durationMs: number;
}

/** What a context-management action did to the agent's context (Forge: context management as an agent action). */
export type ContextAction = "discard" | "clear-thinking" | "summarize";

/** One change of a program's context by its agent, recorded so the trainer sees where the context changed. */
export interface ContextEvent {
  programId: string;
  /** Index of the first call that sees the changed context (the calls before it saw the old one). */
  callIndex: number;
  /** The context policy that acted (e.g. `discard-all`). */
  policy: string;
  action: ContextAction;
  /** Context size before and after the change, in tokens (exact where the engine reported them, else estimated). */
  tokensBefore: number;
  tokensAfter: number;
  messagesBefore: number;
  messagesAfter: number;
  /** What replaced the dropped part (a summary or a note), if anything. */
  detail?: string;
}

/** Reward of one program: the total and each named component. */
export interface Reward {
  total: number;
  components: Record<string, number>;
}

/** A program with everything it produced. */
export interface Trajectory {
  program: Program;
  calls: Call[];
  tools: ToolEvent[];
  reward?: Reward;
  /** Context-management events in record order; present only when the program has any. */
  contextEvents?: ContextEvent[];
}

/** n programs sampled for one task; the unit of GRPO advantage normalisation. */
export interface Group {
  id: string;
  runId: string;
  taskId: string;
  programIds: string[];
  /**
   * The iteration of its run the group was rolled out in (1-based; a sync run's iterations all belong to the one
   * run). Absent: not known (an async run's groups, a store written before schema 7 / migration 3).
   */
  iteration?: number;
  /**
   * Present only on a held-out evaluation group (loop/held-out-programs.ts): the policy version it scored. Such a
   * group belongs to its run like the training groups but is never trained on (no batch, no export batch).
   * Absent: a training group (and every group of a store written before schema 8 / migration 4).
   */
  heldOutVersion?: number;
  /**
   * The resume of its run whose process rolled the group out (1: the first `--resume`); absent: the run's first
   * process (and every group of a store written before schema 10 / migration 6). An iteration or evaluation cut by a
   * kill is rolled out again by the resumed process: its groups of the highest attempt are the ones that count.
   */
  attempt?: number;
}

/** Where the gateway records every call; implemented by the trajectory store. */
export interface TraceSink {
  /** Record one finished call. Resolves once it is durable (nothing lost on a crash after); rejects, with nothing recorded, otherwise. */
  recordCall(call: Call): Promise<void>;
}
