// `arbor inspect <store> [program]`: a store read as a person reads it. Without a program: each run with its
// aggregates and one line per program (env/task, state, termination, reward and components, calls, tokens).
// With one: its trajectory as turns — each call's new prompt tokens and its output decoded with the run's
// tokenizer (run-tokenizer.ts; ids shown, with the reason, where there is none), the tools the output called,
// context resets and context-management events where they happened, the reward's components and the
// termination. `--json` prints the same facts as one JSON document. A run's held-out evaluation programs (groups
// `<run>/eval-v<k>/g<i>`, Group.heldOutVersion) are listed with their run, marked `eval-v<k>` where training
// programs show their iteration, and counted apart: the run's aggregates are its rollout's, `heldOut` theirs. The
// programs of an iteration or evaluation a kill cut, which the resumed run rolled out again (Group.attempt), are
// counted apart too (`superseded`) and marked `cut`: no batch holds them and no score counts them.
import { ArborError } from "../core/errors.js";
import type { Call, Group, Trajectory } from "../core/types.js";
import { batchStats } from "../loop/iteration-result.js";
import type { ModelTokenizer } from "../model/tokenizer.js";
import { runTrajectories } from "../store/held-out-groups.js";
import type { RunRecord, RunStats, TrajectoryStore } from "../store/trajectory-store.js";
import { decodeIds, runTokenizer, type RunTokenizer } from "./run-tokenizer.js";
import { openStoreArg } from "./store-arg.js";

/** Options of `arbor inspect`. */
export interface InspectOptions {
  json?: boolean;
  /** A GGUF whose tokenizer decodes the ids (overrides the run's model). */
  model?: string;
}

/** One program's line of the run listing. */
export interface ProgramSummary {
  id: string;
  groupId: string;
  /** The iteration of the run its group was rolled out in (a sync run's); null when the group records none. */
  iteration: number | null;
  /** The policy version a held-out evaluation program scored (never trained on); null for a training program. */
  heldOutVersion: number | null;
  /** Of an iteration or evaluation a kill cut and the resumed run rolled out again (in no batch, no score). */
  superseded: boolean;
  taskId: string;
  state: string;
  termination: string | null;
  terminationDetail: string | null;
  reward: number | null;
  components: Record<string, number> | null;
  calls: number;
  toolCalls: number;
  promptTokens: number;
  outputTokens: number;
}

/** One run of the listing. */
export interface RunSummary {
  id: string;
  name: string;
  env: string | null;
  startedAt: number;
  endedAt: number | null;
  /** Aggregates over the run's training programs (its rollout). */
  stats: RunStats;
  /** Aggregates over its held-out evaluation programs (their last attempts); null when it has none. */
  heldOut: RunStats | null;
  /** Aggregates over the programs a later attempt superseded (what a kill cut); null when there are none. */
  superseded: RunStats | null;
  /**
   * Per evaluated policy version, in version order: its held-out programs and their mean outcome (empty: none),
   * of its last attempt only (Group.attempt, after a resume): an evaluation a kill cut is no score.
   */
  heldOutVersions: { version: number; programs: number; meanReward: number | null }[];
  programs: ProgramSummary[];
}

/** One call of a trajectory, as turns. */
export interface Turn {
  callIndex: number;
  callId: string;
  backend: string;
  servedModel: string | null;
  /** The model name the client asked for, where recorded (black-box agents name their vendor's). */
  requestedModel: string | null;
  /** A max_tokens the gateway clamped to what the context left, or null. */
  maxTokensClamped: { asked: number; granted: number } | null;
  policyVersion: number;
  /** Policy version of each output token when they differ (an engine switched weights mid-call); else null. */
  tokenPolicyVersions: number[] | null;
  finishReason: string;
  /** Context events (recorded before this call) whose changed context this call is the first to see. */
  contextEvents: Trajectory["contextEvents"];
  contextReset: string | null;
  /** Prompt ids this call added to the previous call's prompt ‖ output (all of them after a reset or on the first call). */
  newPromptIds: number[];
  /** Where `newPromptIds` start within the call's prompt. */
  newPromptFrom: number;
  promptTokens: number;
  newPromptText: string | null;
  outputIds: number[];
  outputText: string | null;
  tools: Trajectory["tools"];
}

/** One program's trajectory, as turns. */
export interface TrajectoryView {
  program: Trajectory["program"];
  reward: Trajectory["reward"] | null;
  tokenizer: { source: string } | { unavailable: string };
  turns: Turn[];
}

function envOf(run: RunRecord): string | null {
  try {
    const env = (JSON.parse(run.configJson) as { env?: { name?: unknown; module?: unknown } }).env;
    // A module environment replaces env.name (which keeps its default): name the module's file instead.
    if (typeof env?.module === "string") return `module ${env.module.split(/[\\/]/).pop() ?? env.module}`;
    return typeof env?.name === "string" ? env.name : null;
  } catch {
    return null;
  }
}

function programSummary(t: Trajectory, groups: ReadonlyMap<string, Group>, superseded: ReadonlySet<Trajectory>): ProgramSummary {
  const p = t.program;
  const g = groups.get(p.groupId);
  return {
    id: p.id,
    groupId: p.groupId,
    iteration: g?.iteration ?? null,
    heldOutVersion: g?.heldOutVersion ?? null,
    superseded: superseded.has(t),
    taskId: p.taskId,
    state: p.state,
    termination: p.termination?.kind ?? null,
    terminationDetail: p.termination?.detail ?? null,
    reward: t.reward?.total ?? null,
    components: t.reward?.components ?? null,
    calls: t.calls.length,
    toolCalls: t.tools.filter((x) => !x.tool.startsWith("arbor:")).length,
    promptTokens: t.calls.reduce((n, c) => n + c.promptTokenIds.length, 0),
    outputTokens: t.calls.reduce((n, c) => n + c.outputTokenIds.length, 0),
  };
}

/**
 * The listing's order: the starting policy's evaluation, iteration 1, the evaluation after it, iteration 2, …, each
 * by attempt, group and sample (the store keeps them in creation order, where an evaluation and the iteration
 * beside it interleave); programs of neither (an async run's) keep their place after them.
 */
function listingOrder(all: readonly Trajectory[], groups: ReadonlyMap<string, Group>): Trajectory[] {
  const rank = (t: Trajectory): number => {
    const g = groups.get(t.program.groupId);
    if (g?.heldOutVersion != null) return 2 * g.heldOutVersion + 1;
    return g?.iteration != null ? 2 * g.iteration : Infinity;
  };
  // A cut attempt before the one that replaced it, then groups in their numeric order (g2 before g10).
  const attempt = (t: Trajectory): number => groups.get(t.program.groupId)?.attempt ?? 0;
  const byGroup = (a: Trajectory, b: Trajectory): number => attempt(a) - attempt(b) || a.program.groupId.localeCompare(b.program.groupId, "en", { numeric: true });
  return all
    .map((t, i) => ({ t, i, r: rank(t) }))
    .sort((a, b) => a.r - b.r || (a.r === Infinity ? a.i - b.i : byGroup(a.t, b.t) || a.t.program.sampleIndex - b.t.program.sampleIndex || a.i - b.i))
    .map((x) => x.t);
}

/** Held-out trajectories (their last attempts) per evaluated version: the versions' scores apart, not one mean. */
function byVersion(heldOut: readonly Trajectory[], groups: ReadonlyMap<string, Group>): RunSummary["heldOutVersions"] {
  const of = new Map<number, Trajectory[]>();
  for (const t of heldOut) {
    const v = groups.get(t.program.groupId)?.heldOutVersion as number;
    const list = of.get(v);
    if (list) list.push(t);
    else of.set(v, [t]);
  }
  return [...of].sort((a, b) => a[0] - b[0]).map(([version, ts]) => ({ version, programs: ts.length, meanReward: batchStats(ts).meanReward }));
}

/** Every run of the store with its programs. */
export async function summarizeStore(store: TrajectoryStore): Promise<RunSummary[]> {
  const out: RunSummary[] = [];
  for (const run of await store.listRuns()) {
    const { groups: groupList, all, training, heldOut, superseded } = await runTrajectories(store, run.id);
    const groups = new Map(groupList.map((g) => [g.id, g]));
    const cut = new Set(superseded);
    out.push({
      id: run.id,
      name: run.name,
      env: envOf(run),
      startedAt: run.startedAt,
      endedAt: run.endedAt ?? null,
      // The store's own aggregates where every program is the rollout's; else the rollout's programs apart.
      stats: heldOut.length + superseded.length === 0 ? await store.stats(run.id) : batchStats(training),
      heldOut: heldOut.length === 0 ? null : batchStats(heldOut),
      superseded: superseded.length === 0 ? null : batchStats(superseded),
      heldOutVersions: byVersion(heldOut, groups),
      programs: listingOrder(all, groups).map((t) => programSummary(t, groups, cut)),
    });
  }
  return out;
}

function startsWith(seq: readonly number[], prefix: readonly number[]): boolean {
  return prefix.length <= seq.length && prefix.every((x, i) => seq[i] === x);
}

/** The trajectory as turns, decoded with `tok` when there is one. */
export function trajectoryView(t: Trajectory, tok: RunTokenizer): TrajectoryView {
  const calls = [...t.calls].sort((a, b) => a.index - b.index);
  const decode = (ids: readonly number[]): string | null => (tok.tokenizer ? (decodeIds(tok.tokenizer as ModelTokenizer, ids) ?? null) : null);
  let prev: Call | undefined;
  const turns = calls.map((c): Turn => {
    const context = prev ? [...prev.promptTokenIds, ...prev.outputTokenIds] : [];
    const from = prev && !c.contextReset && startsWith(c.promptTokenIds, context) ? context.length : 0;
    prev = c;
    const newPromptIds = c.promptTokenIds.slice(from);
    return {
      callIndex: c.index,
      callId: c.id,
      backend: c.backend,
      servedModel: c.servedModel ?? null,
      requestedModel: c.requestedModel ?? null,
      maxTokensClamped: c.maxTokensClamped ?? null,
      policyVersion: c.policyVersion,
      tokenPolicyVersions: c.tokenPolicyVersions ?? null,
      finishReason: c.finishReason,
      contextEvents: (t.contextEvents ?? []).filter((e) => e.callIndex === c.index),
      contextReset: c.contextReset ? (c.contextResetReason ?? "reason not recorded") : null,
      newPromptIds,
      newPromptFrom: from,
      promptTokens: c.promptTokenIds.length,
      newPromptText: decode(newPromptIds),
      outputIds: c.outputTokenIds,
      outputText: decode(c.outputTokenIds),
      tools: t.tools.filter((x) => x.callIndex === c.index),
    };
  });
  const anyUndecodable = tok.tokenizer !== undefined && turns.some((x) => x.newPromptText === null || x.outputText === null);
  return {
    program: t.program,
    reward: t.reward ?? null,
    tokenizer: tok.tokenizer
      ? anyUndecodable
        ? { unavailable: `some ids are outside ${tok.source} (size ${tok.tokenizer.size}); pass --model <gguf>` }
        : { source: tok.source }
      : { unavailable: tok.reason },
    turns,
  };
}

const fmt = (x: number | null): string => (x === null ? "-" : Number.isInteger(x) ? String(x) : x.toFixed(3));
const components = (c: Record<string, number> | null): string => (c === null ? "" : Object.entries(c).map(([k, v]) => `${k}=${fmt(v)}`).join(" "));

function table(rows: string[][]): string[] {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join("  ").trimEnd());
}

function printRuns(runs: RunSummary[], label: string): void {
  if (runs.length === 0) console.log(`${label}: no runs`);
  for (const r of runs) {
    const s = r.stats;
    const ends = Object.entries(s.terminations).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(", ");
    console.log(`run ${r.id}  (${r.name}${r.env ? `, env ${r.env}` : ""}; started ${new Date(r.startedAt).toISOString()}, ${r.endedAt === null ? "not ended" : `ended ${new Date(r.endedAt).toISOString()}`})`);
    console.log(`  ${s.programs} program${s.programs === 1 ? "" : "s"} (${ends || "none ended"}${s.unfinished > 0 ? `, ${s.unfinished} unfinished` : ""}), ${s.calls} calls, ${s.promptTokens} prompt + ${s.outputTokens} output tokens, mean reward ${fmt(s.meanReward)}`);
    const h = r.heldOut;
    if (h !== null) console.log(`  + ${h.programs} held-out evaluation program${h.programs === 1 ? "" : "s"} (never trained on; ${h.unfinished > 0 ? `${h.unfinished} unfinished, ` : ""}${h.calls} calls), mean outcome ${r.heldOutVersions.map((v) => `v${v.version} ${fmt(v.meanReward)}`).join(", ")}`);
    const c = r.superseded;
    if (c !== null) console.log(`  + ${c.programs} program${c.programs === 1 ? "" : "s"} cut by a kill and rolled out again on resume (marked cut; in no batch and no score; ${c.calls} calls)`);
    const rows = [["  program", "it", "task", "state", "termination", "reward", "calls", "tools", "tokens", "components"]];
    for (const p of r.programs) {
      const it = p.heldOutVersion !== null ? `eval-v${p.heldOutVersion}` : p.iteration === null ? "-" : String(p.iteration);
      rows.push([`  ${p.id}`, p.superseded ? `${it} cut` : it, p.taskId, p.state, p.termination ?? "-", fmt(p.reward), String(p.calls), String(p.toolCalls), `${p.promptTokens}+${p.outputTokens}`, components(p.components)]);
    }
    for (const line of table(rows)) console.log(line);
  }
}

/** ` (tokens v1–v2)` when a call's tokens came from several policy versions. */
function versionSpan(versions: number[] | null): string {
  if (versions === null || versions.length === 0) return "";
  const lo = Math.min(...versions);
  const hi = Math.max(...versions);
  return lo === hi ? "" : ` (tokens v${lo}–v${hi})`;
}

/** Indent every line of `text` by `pad`, showing an empty text as such. */
function block(text: string, pad: string): string {
  return text === "" ? `${pad}(empty)` : text.split("\n").map((l) => pad + l).join("\n");
}

function printTrajectory(v: TrajectoryView): void {
  const p = v.program;
  console.log(`program ${p.id}  (run ${p.runId}, group ${p.groupId}, task ${p.taskId}, sample ${p.sampleIndex})`);
  console.log(`state ${p.state}; termination ${p.termination ? `${p.termination.kind}${p.termination.detail ? ` (${p.termination.detail})` : ""}` : "-"}`);
  console.log(`reward ${v.reward ? `${fmt(v.reward.total)}  ${components(v.reward.components)}` : "-"}`);
  console.log("tokenizer" in v && "source" in v.tokenizer ? `tokens decoded with ${v.tokenizer.source}` : `token ids shown: ${(v.tokenizer as { unavailable: string }).unavailable}`);
  for (const t of v.turns) {
    console.log("");
    for (const e of t.contextEvents ?? []) {
      console.log(`  context ${e.policy}: ${e.action}, ${e.tokensBefore} → ${e.tokensAfter} tokens, ${e.messagesBefore} → ${e.messagesAfter} messages${e.detail ? ` (${e.detail})` : ""}`);
    }
    console.log(`── call ${t.callIndex}  ${t.callId}  (${t.backend}${t.servedModel ? `, ${t.servedModel}` : ""}, policy v${t.policyVersion}${versionSpan(t.tokenPolicyVersions)}, finish ${t.finishReason}, ${t.promptTokens} prompt + ${t.outputIds.length} output tokens)`);
    if (t.contextReset !== null) console.log(`  context reset: ${t.contextReset}`);
    if (t.requestedModel !== null && t.requestedModel !== t.servedModel) console.log(`  asked for model: ${t.requestedModel}`);
    if (t.maxTokensClamped !== null) console.log(`  max_tokens clamped: ${t.maxTokensClamped.asked} → ${t.maxTokensClamped.granted} (agent.maxTokensPerCall, or what the context left)`);
    const promptHead = t.newPromptFrom > 0 ? `  prompt (new after token ${t.newPromptFrom}):` : "  prompt:";
    console.log(promptHead);
    console.log(block(t.newPromptText ?? `ids ${JSON.stringify(t.newPromptIds)}`, "    "));
    console.log("  output:");
    console.log(block(t.outputText ?? `ids ${JSON.stringify(t.outputIds)}`, "    "));
    for (const x of t.tools ?? []) {
      console.log(`  tool ${x.tool} (${x.ok ? "ok" : "failed"}, ${x.durationMs} ms)`);
      console.log(block(`input: ${x.input}`, "    "));
      console.log(block(`output: ${x.output}`, "    "));
    }
  }
}

/** `arbor inspect`: print the store's runs, or one program's trajectory. Throws an {@link ArborError} for an unknown program. */
export async function inspectCommand(storeArg: string, programId: string | undefined, opts: InspectOptions = {}): Promise<void> {
  if (programId === undefined && opts.model !== undefined) throw new ArborError("--model decodes one program's trajectory: give a program id after the store", "config");
  const { store, label } = await openStoreArg(storeArg);
  try {
    if (programId === undefined) {
      const runs = await summarizeStore(store);
      if (opts.json) console.log(JSON.stringify({ store: label, runs }, null, 2));
      else printRuns(runs, label);
      return;
    }
    const t = await store.getTrajectory(programId);
    if (!t) throw new ArborError(`program '${programId}' is not in ${label}`, "config");
    const run = await store.getRun(t.program.runId);
    const view = trajectoryView(t, runTokenizer(run?.configJson ?? "{}", opts.model));
    if (opts.json) console.log(JSON.stringify(view, null, 2));
    else printTrajectory(view);
  } finally {
    await store.close();
  }
}
