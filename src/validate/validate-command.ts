// `arbor validate <env or dataset>`: load the tasks, run the ground-truth and no-op checks in bwrap
// sandboxes and the optional judge panel through the gateway, print the table, and write the JSON
// report and the filtered dataset (only the tasks that passed) into the output folder.
import { randomUUID } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ArborError } from "../core/errors.js";
import { makeOutputDir } from "../core/output-dir.js";
import { createGatewayChat, type GatewayChat } from "../reward/judge/gateway-chat.js";
import { bwrapAvailable, createBwrapProvider } from "../sandbox/bwrap.js";
import { isModuleSpec, loadDataset, moduleDataset } from "./dataset.js";
import type { PanelJudge } from "./judge-panel.js";
import { formatValidationTable } from "./report-table.js";
import { validateDataset, type ValidationReport } from "./validate-tasks.js";

export interface ValidateCommandOptions {
  /** Output folder (default `.arbor/validate/<dataset name>`). */
  out?: string;
  /** Environment of JSONL lines that name none. */
  env?: string;
  /** Tasks to take when the target is an environment. */
  tasks?: number;
  seed?: number;
  concurrency?: number;
  passScore?: number;
  /** Judge models: `model` (through `judgeGateway`) or `model@http://gateway`. */
  judges?: string[];
  judgeGateway?: string;
  /** Environment variable holding the gateways' admin token (when they require credentials). */
  judgeAdminTokenEnv?: string;
  judgeAttempts?: number;
  judgeMinApprovals?: number;
  /** Where sandboxes are created (default a fresh temporary folder). */
  sandboxRoot?: string;
}

/**
 * The panel judges named on the command line: one chat per gateway, whose judge programs go in a run of their own
 * (`run.id`, `-2`, `-3`… for further gateways) where a store-backed gateway needs one.
 */
export function parseJudges(specs: readonly string[], defaultGateway: string | undefined, adminToken: string | undefined, run?: { id: string; name: string }): { judges: PanelJudge[]; chats: GatewayChat[] } {
  const chats = new Map<string, GatewayChat>();
  const chatOf = (gatewayUrl: string): GatewayChat => {
    const known = chats.get(gatewayUrl);
    if (known) return known;
    const id = chats.size === 0 ? run?.id : `${run?.id}-${chats.size + 1}`;
    const chat = createGatewayChat({ gatewayUrl, ...(adminToken ? { adminToken } : {}), ...(run && id ? { run: { id, name: run.name } } : {}) });
    chats.set(gatewayUrl, chat);
    return chat;
  };
  const judges = specs.map((spec) => {
    const at = spec.indexOf("@");
    const model = at >= 0 ? spec.slice(0, at) : spec;
    const gatewayUrl = at >= 0 ? spec.slice(at + 1) : defaultGateway;
    if (!model) throw new ArborError(`validate: --judge '${spec}' names no model`, "config");
    if (!gatewayUrl) throw new ArborError(`validate: judge '${model}' has no gateway: give --judge-gateway <url> or --judge ${model}@<url>`, "config");
    if (!/^https?:\/\//.test(gatewayUrl)) throw new ArborError(`validate: judge '${model}': gateway must be an http(s) URL, got '${gatewayUrl}'`, "config");
    return { model, chat: chatOf(gatewayUrl) };
  });
  return { judges, chats: [...chats.values()] };
}

/** Run the validation; prints the table to stdout and returns the report. */
export async function validateCommand(target: string, opts: ValidateCommandOptions = {}): Promise<ValidationReport> {
  const load = { ...(opts.tasks !== undefined ? { count: opts.tasks } : {}), ...(opts.seed !== undefined ? { seed: opts.seed } : {}), ...(opts.env ? { env: opts.env } : {}) };
  // A module path (`./my-env.ts`, `./envs.mjs#shop`) is a user's environment, loaded as `env.module` loads it.
  const dataset = isModuleSpec(target) ? await moduleDataset(target, load) : loadDataset(target, load);
  const out = resolve(opts.out ?? join(".arbor", "validate", dataset.name.replace(/[^A-Za-z0-9_.-]+/g, "_").replace(/^[._]+/, "") || "dataset"));
  makeOutputDir(out, "--out");
  let adminToken: string | undefined;
  if (opts.judgeAdminTokenEnv) {
    adminToken = process.env[opts.judgeAdminTokenEnv];
    if (!adminToken) throw new ArborError(`validate: environment variable ${opts.judgeAdminTokenEnv} (the judge gateway's admin token) is not set`, "config");
  }
  const runId = `validate-${randomUUID().slice(0, 8)}`;
  const { judges, chats } = parseJudges(opts.judges ?? [], opts.judgeGateway, adminToken, { id: runId, name: `validate ${dataset.name}` });
  const probe = bwrapAvailable();
  if (!probe.ok) throw new ArborError(`validate: sandboxes unavailable: ${probe.message}`, "sandbox");

  const ownRoot = opts.sandboxRoot === undefined;
  const root = opts.sandboxRoot ?? mkdtempSync(join(tmpdir(), "arbor-validate-"));
  // Sandboxes run as uid 65534 when Arbor runs as root: the root folder must be reachable by it.
  chmodSync(root, 0o755);
  const sandboxes = createBwrapProvider({ root, limits: { cpuSeconds: 20, memoryMb: 4096, wallMs: 60_000 } });
  let report: ValidationReport;
  try {
    report = await validateDataset(dataset, {
      sandboxes,
      runId,
      ...(opts.concurrency !== undefined ? { concurrency: opts.concurrency } : {}),
      ...(opts.passScore !== undefined ? { passScore: opts.passScore } : {}),
      judges,
      panel: { ...(opts.judgeAttempts !== undefined ? { maxAttempts: opts.judgeAttempts } : {}), ...(opts.judgeMinApprovals !== undefined ? { minApprovals: opts.judgeMinApprovals } : {}) },
    });
  } finally {
    // The judges' runs end with the validation (a gateway that needed none has none to end).
    for (const chat of chats) await chat.endRun().catch((e: unknown) => console.error(`validate: ${e instanceof Error ? e.message : String(e)}`));
    await sandboxes.destroyAll();
    if (ownRoot) rmSync(root, { recursive: true, force: true });
  }

  const reportPath = join(out, "report.json");
  writeFileSync(reportPath, `${JSON.stringify(report, null, 2)}\n`);
  const filtered = dataset.writeFiltered(new Set(report.tasks.filter((t) => t.kept).map((t) => t.id)), join(out, dataset.filteredName));
  console.log(formatValidationTable(report));
  console.log(`report: ${reportPath}`);
  console.log(`filtered dataset: ${filtered}`);
  const undecided = report.tasks.filter((t) => t.judge?.undecided);
  if (undecided.length > 0) {
    const why = undecided[0]?.judge?.votes.find((v) => v.unreachable)?.error ?? "";
    console.error(`validate: ${undecided.length} task(s) undecided and left out: their judges could not be reached (${why})`);
  }
  return report;
}
