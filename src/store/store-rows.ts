// Rows of the stores' tables (SQLite and Postgres share the schema's column names) and their conversion to
// Arbor's types: token ids and logprobs decoded from their blobs by codec.ts, bit for bit; flags are booleans
// in Postgres and 0/1 in SQLite.
import type {
  Call,
  ChatMessage,
  ContextAction,
  ContextEvent,
  FinishReason,
  Group,
  Program,
  ProgramState,
  Reward,
  Termination,
  TerminationKind,
  ToolEvent,
} from "../core/types.js";
import { decodeFloat64s, decodeTokenIds } from "./codec.js";
import type { RunRecord } from "./trajectory-store.js";

export interface RunRow {
  id: string;
  name: string;
  config_json: string;
  started_at: number;
  ended_at: number | null;
}
export interface GroupRow {
  id: string;
  run_id: string;
  task_id: string;
  program_ids: string[];
  iteration: number | null;
  held_out_version: number | null;
  /** NULL in a row written before the column existed, as for a first process's group. */
  attempt?: number | null;
}
export interface ProgramRow {
  id: string;
  run_id: string;
  group_id: string;
  task_id: string;
  sample_index: number;
  state: string;
  created_at: number;
  ended_at: number | null;
  termination_kind: string | null;
  termination_detail: string | null;
}
export interface CallRow {
  id: string;
  program_id: string;
  idx: number;
  messages: string;
  prompt_token_ids: Buffer;
  output_token_ids: Buffer;
  logprobs: Buffer;
  output_text: string;
  finish_reason: string;
  backend: string;
  policy_version: number;
  start_ms: number;
  end_ms: number;
  trainable: boolean | number;
  context_reset: boolean | number;
  token_policy_versions: Buffer | null;
  served_model: string | null;
  context_reset_reason: string | null;
  requested_model: string | null;
  max_tokens_asked: number | null;
  max_tokens_granted: number | null;
}
export interface ToolRow {
  program_id: string;
  call_index: number;
  tool: string;
  input: string;
  output: string;
  ok: boolean | number;
  duration_ms: number;
}
export interface ContextEventRow {
  program_id: string;
  call_index: number;
  policy: string;
  action: string;
  tokens_before: number;
  tokens_after: number;
  messages_before: number;
  messages_after: number;
  detail: string | null;
}
export interface RewardRow {
  program_id: string;
  total: number;
  components: string;
}

/** Columns of `programs` in insert order (the order of {@link programRowValues}). */
export const PROGRAM_COLUMNS = "id, run_id, group_id, task_id, sample_index, state, created_at, ended_at, termination_kind, termination_detail";

/** A program's values in {@link PROGRAM_COLUMNS} order; `text` stores its termination detail (Postgres escapes NUL). */
export function programRowValues(p: Program, text: (s: string) => string = (s) => s): unknown[] {
  const detail = p.termination?.detail;
  return [p.id, p.runId, p.groupId, p.taskId, p.sampleIndex, p.state, p.createdAt, p.endedAt ?? null, p.termination?.kind ?? null, detail === undefined ? null : text(detail)];
}

/** Columns of `calls` in insert order (also the order of {@link callParams}). */
export const CALL_COLUMNS = [
  "id",
  "program_id",
  "idx",
  "messages",
  "prompt_token_ids",
  "output_token_ids",
  "logprobs",
  "output_text",
  "finish_reason",
  "backend",
  "policy_version",
  "start_ms",
  "end_ms",
  "trainable",
  "context_reset",
  "token_policy_versions",
  "served_model",
  "context_reset_reason",
  "requested_model",
  "max_tokens_asked",
  "max_tokens_granted",
] as const;

/** A run as stored. */
export function runFromRow(r: RunRow): RunRecord {
  const run: RunRecord = { id: r.id, name: r.name, configJson: r.config_json, startedAt: r.started_at };
  if (r.ended_at !== null) run.endedAt = r.ended_at;
  return run;
}

/** A group as stored (members in the order they joined). */
export function groupFromRow(g: GroupRow): Group {
  return { id: g.id, runId: g.run_id, taskId: g.task_id, programIds: g.program_ids, ...(g.iteration !== null && g.iteration !== undefined ? { iteration: g.iteration } : {}), ...(g.held_out_version !== null && g.held_out_version !== undefined ? { heldOutVersion: g.held_out_version } : {}), ...(typeof g.attempt === "number" ? { attempt: g.attempt } : {}) };
}

/** A program as stored; absent end and termination stay absent. */
export function programFromRow(r: ProgramRow): Program {
  const p: Program = {
    id: r.id,
    runId: r.run_id,
    taskId: r.task_id,
    groupId: r.group_id,
    sampleIndex: r.sample_index,
    state: r.state as ProgramState,
    createdAt: r.created_at,
  };
  if (r.ended_at !== null) p.endedAt = r.ended_at;
  if (r.termination_kind !== null) {
    const t: Termination = { kind: r.termination_kind as TerminationKind };
    if (r.termination_detail !== null) t.detail = r.termination_detail;
    p.termination = t;
  }
  return p;
}

/**
 * What is wrong with a call's client-side fields (requested model, clamped max_tokens), or undefined:
 * both stores refuse such a call naming the field, so neither stores what the other would not.
 */
export function clientFieldsProblem(call: Call): string | undefined {
  const r = call.requestedModel;
  if (r !== undefined && (typeof r !== "string" || r.length === 0)) return `call '${call.id}' requestedModel: must be a non-empty string`;
  const m = call.maxTokensClamped;
  if (m === undefined) return undefined;
  const ok = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 1 && (v as number) <= 0x7fffffff;
  if (typeof m !== "object" || m === null || !ok(m.asked) || !ok(m.granted) || m.granted >= m.asked) {
    return `call '${call.id}' maxTokensClamped: must be {asked, granted}, integers >= 1 with granted < asked, got ${JSON.stringify(m)}`;
  }
  return undefined;
}

/** A call as stored; optional flags are present only when they were set. */
export function callFromRow(r: CallRow): Call {
  const call: Call = {
    id: r.id,
    programId: r.program_id,
    index: r.idx,
    messages: JSON.parse(r.messages) as ChatMessage[],
    promptTokenIds: decodeTokenIds(r.prompt_token_ids),
    outputTokenIds: decodeTokenIds(r.output_token_ids),
    logprobs: decodeFloat64s(r.logprobs),
    outputText: r.output_text,
    finishReason: r.finish_reason as FinishReason,
    backend: r.backend,
    policyVersion: r.policy_version,
    timings: { start: r.start_ms, end: r.end_ms },
  };
  if (!r.trainable) call.trainable = false;
  if (r.context_reset) call.contextReset = true;
  if (r.token_policy_versions !== null) call.tokenPolicyVersions = decodeTokenIds(r.token_policy_versions);
  if (r.served_model !== null) call.servedModel = r.served_model;
  if (r.context_reset_reason !== null) call.contextResetReason = r.context_reset_reason;
  if (r.requested_model !== null) call.requestedModel = r.requested_model;
  if (r.max_tokens_asked !== null && r.max_tokens_granted !== null) call.maxTokensClamped = { asked: r.max_tokens_asked, granted: r.max_tokens_granted };
  return call;
}

/** A tool event as stored. */
export function toolFromRow(r: ToolRow): ToolEvent {
  return {
    programId: r.program_id,
    callIndex: r.call_index,
    tool: r.tool,
    input: r.input,
    output: r.output,
    ok: Boolean(r.ok),
    durationMs: r.duration_ms,
  };
}

/** A context-management event as stored. */
export function contextEventFromRow(r: ContextEventRow): ContextEvent {
  const e: ContextEvent = {
    programId: r.program_id,
    callIndex: r.call_index,
    policy: r.policy,
    action: r.action as ContextAction,
    tokensBefore: r.tokens_before,
    tokensAfter: r.tokens_after,
    messagesBefore: r.messages_before,
    messagesAfter: r.messages_after,
  };
  if (r.detail !== null) e.detail = r.detail;
  return e;
}

/** A reward as stored. */
export function rewardFromRow(r: RewardRow): Reward {
  return { total: r.total, components: JSON.parse(r.components) as Record<string, number> };
}
