// `arbor inspect` and `arbor export` as a user runs them, on a small real store (testing/inspect-store.ts): the
// run listing, one trajectory as decoded turns (text and --json), an export through the command, and the
// one-line errors for an unknown store, program and format.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresTrajectoryStore } from "../store/postgres-store.js";
import { fillInspectStore, writeInspectStore, type InspectStore } from "../testing/inspect-store.js";
import { dropTestSchema, POSTGRES_TEST_URL, postgresUnreachable, testSchemaName } from "../testing/postgres-test-db.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { trajectoryView, type RunSummary, type TrajectoryView } from "./inspect.js";
import { runTokenizer } from "./run-tokenizer.js";

const root = join(import.meta.dirname, "../..");
let dir: string;
let fixture: InspectStore;

function arbor(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), ...args], { cwd: dir, encoding: "utf8", timeout: 120_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function expectOneLineError(r: { status: number | null; stderr: string }, pattern: RegExp): void {
  expect(r.status).toBe(1);
  const lines = r.stderr.trim().split("\n");
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^arbor: error: /);
  expect(lines[0]).toMatch(pattern);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-inspect-"));
  fixture = await writeInspectStore(join(dir, "store.sqlite"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("arbor inspect", () => {
  it("stops quietly, exit 0, when its reader closes the pipe (`arbor inspect … | head`)", async () => {
    const child = spawn(process.execPath, [join(root, "bin/arbor.mjs"), "inspect", fixture.path], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
    // The reader is gone before the first line: every write meets a closed pipe.
    child.stdout.destroy();
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
    expect(stderr).toBe("");
    expect(code).toBe(0);
  });

  it("lists runs and programs with terminations, rewards and components (--json has the same)", () => {
    const r = arbor("inspect", fixture.path);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^run run-1 .*env calc/m);
    expect(r.stdout).toMatch(/3 programs \(completed 2, max_turns 1\), 5 calls/);
    expect(r.stdout).toMatch(/^ {2}g1-p1 +- +calc-7 +terminated +completed +0\.250 +2 +1 +\S+ +outcome=0\.250 format=1$/m);
    expect(r.stdout).toMatch(/^ {2}g3-p0 +- +calc-9 +terminated +aborted +- +1 +0/m);
    const j = JSON.parse(arbor("inspect", fixture.path, "--json").stdout) as { runs: RunSummary[] };
    expect(j.runs.map((x) => x.id)).toEqual(["run-1", "run-2"]);
    const p0 = j.runs[0]!.programs[0]!;
    const calls = fixture.calls.filter((c) => c.programId === "g1-p0");
    expect(p0).toMatchObject({ id: "g1-p0", iteration: null, taskId: "calc-7", termination: "completed", reward: 1, components: { outcome: 1, format: 1 }, calls: 2, toolCalls: 1 });
    expect(p0.outputTokens).toBe(calls.reduce((n, c) => n + c.outputTokenIds.length, 0));
  });

  it("prints one trajectory as decoded turns: new prompt text, output, tool calls, reward, termination", () => {
    const r = arbor("inspect", join(dir), "g1-p0");
    expect(r.status, r.stderr).toBe(0);
    const t = fixture.texts;
    expect(r.stdout).toContain("tokens decoded with Arbor's vocabulary");
    expect(r.stdout).toContain("reward 1  outcome=1 format=1");
    expect(r.stdout).toContain("termination completed");
    // Turn 0 shows its whole prompt; turn 1 only what it added (the tool turn) after the 0th call's prompt ‖ output.
    const [turn0, turn1] = r.stdout.split(/^── call /m).slice(1);
    expect(turn0).toContain(`    ${t.prompt0}\n  output:\n    ${t.output0}\n  tool calc (ok, 3 ms)\n    input: {"expr":"6*7"}\n    output: 42`);
    // The fixture's second call switched weights after two tokens.
    expect(turn1).toMatch(/policy v2 \(tokens v1–v2\), finish stop/);
    expect(turn1).toMatch(/prompt \(new after token \d+\):\n {4}<\|tool\|>42<\|end\|><\|assistant\|>\n {2}output:\n {4}The answer is 42\.<\|end\|>/);
  });

  it("shows a context reset and a context-management event where they happened (--json)", () => {
    const r = arbor("inspect", fixture.path, "g1-p1", "--json");
    expect(r.status, r.stderr).toBe(0);
    const v = JSON.parse(r.stdout) as TrajectoryView;
    expect(v.tokenizer).toEqual({ source: "Arbor's vocabulary (the run's model.vocab)" });
    expect(v.reward).toEqual({ total: 0.25, components: { outcome: 0.25, format: 1 } });
    expect(v.turns.map((x) => x.contextReset)).toEqual([null, "history differs"]);
    expect(v.turns.map((x) => [x.requestedModel, x.maxTokensClamped])).toEqual([
      [null, null],
      ["claude-sonnet-4-5", { asked: 64_000, granted: 900 }],
    ]);
    const text = arbor("inspect", fixture.path, "g1-p1");
    expect(text.stdout).toContain("  asked for model: claude-sonnet-4-5\n  max_tokens clamped: 64000 → 900 (agent.maxTokensPerCall, or what the context left)");
    expect(v.turns[1]!.contextEvents).toEqual([expect.objectContaining({ policy: "discard-all", action: "discard", tokensAfter: 0 })]);
    expect(v.turns[1]!.newPromptText).toBe("<|user|>Again: 6*7?<|end|><|assistant|>");
    expect(v.turns[1]!.outputText).toBe("It is 42.<|end|>");
    expect(v.turns[0]!.tools.map((x) => x.tool)).toEqual(["calc"]);
  });

  it("without a tokenizer for the run's ids (its model.path gone), shows the ids and says why", async () => {
    const store = new SqliteTrajectoryStore(fixture.path);
    let t;
    try {
      t = await store.getTrajectory("g1-p0");
    } finally {
      await store.close();
    }
    const v = trajectoryView(t!, runTokenizer(JSON.stringify({ model: { path: join(dir, "gone.gguf") } })));
    expect(v.tokenizer).toEqual({ unavailable: `the run's model.path ${join(dir, "gone.gguf")} does not exist (pass --model <gguf>)` });
    expect(v.turns[0]!.outputText).toBeNull();
    expect(v.turns[0]!.outputIds).toEqual(fixture.calls[0]!.outputTokenIds);
  });

  it("--model that gives no tokenizer, or without a program: one line naming --model, exit 1", () => {
    expectOneLineError(arbor("inspect", fixture.path, "g1-p0", "--model", join(dir, "missing.gguf")), /^arbor: error: --model .*missing\.gguf does not exist$/);
    expectOneLineError(arbor("inspect", fixture.path, "g1-p0", "--model", join(root, "README.md")), /^arbor: error: --model .*README\.md: no tokenizer could be read/);
    expectOneLineError(arbor("inspect", fixture.path, "--model", join(root, "models/calc-sft.gguf")), /--model decodes one program's trajectory: give a program id after the store/);
  });

  it("errors: unknown store, unknown program, one line each", () => {
    expectOneLineError(arbor("inspect", join(dir, "nope.sqlite")), /store: no such file: .*nope\.sqlite/);
    // An empty file is no store, and stays empty (opening it as one would write the schema into it).
    const empty = join(dir, "empty.sqlite");
    writeFileSync(empty, "");
    expectOneLineError(arbor("inspect", empty), /store: .*empty\.sqlite is an empty file, not an Arbor store$/);
    expect(statSync(empty).size).toBe(0);
    expect(existsSync(join(dir, "nope.sqlite"))).toBe(false);
    expectOneLineError(arbor("inspect", fixture.path, "no-such-program"), /program 'no-such-program' is not in .*store\.sqlite/);
  });
});

describe("arbor export", () => {
  it("writes the trajectories and the batch, and says what it wrote", () => {
    const out = join(dir, "out");
    const r = arbor("export", fixture.path, "--format", "parquet", "--out", out);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`trajectories  ${join(out, "trajectories.parquet")} (${fixture.calls.length} calls)`);
    expect(r.stdout).toContain(`batch         ${join(out, "batches", "run-1.parquet")} (run run-1, 3 samples)`);
    expect(r.stdout).toContain("no batch      run run-2: no group has a reward for every program");
    expect(existsSync(join(out, "batches", "run-1.parquet"))).toBe(true);
  });

  it("writes Parquet to export/ beside the store when neither --format nor --out is given", () => {
    const r = arbor("export", dir);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`trajectories  ${join(dir, "export", "trajectories.parquet")} (${fixture.calls.length} calls)`);
    expect(existsSync(join(dir, "export", "batches", "run-1.parquet"))).toBe(true);
  });

  it("errors: unknown format, unknown store, a Postgres URL without --out, one line each", () => {
    expectOneLineError(arbor("export", "postgres://127.0.0.1:1/none"), /export: --out is required for a Postgres store/);
    expectOneLineError(arbor("export", fixture.path, "--format", "csv", "--out", join(dir, "x")), /--format: unknown format 'csv' \(known: parquet, jsonl, arrow, safetensors\)/);
    expectOneLineError(arbor("export", join(dir, "nope.sqlite"), "--format", "jsonl", "--out", join(dir, "x")), /store: no such file/);
  });
});

const UNREACHABLE = await postgresUnreachable();

describe.skipIf(UNREACHABLE !== undefined)(`a Postgres store by URL${UNREACHABLE ? ` (skipped: ${UNREACHABLE})` : ""}`, () => {
  const schema = testSchemaName();
  afterAll(() => dropTestSchema(schema));

  it("inspects and exports the same runs as the SQLite file holds (?schema= names the schema)", async () => {
    await fillInspectStore(await PostgresTrajectoryStore.open({ url: POSTGRES_TEST_URL, schema }));
    const url = `${POSTGRES_TEST_URL}?schema=${schema}`;
    const fromPg = JSON.parse(arbor("inspect", url, "--json").stdout) as { store: string; runs: RunSummary[] };
    const fromFile = JSON.parse(arbor("inspect", fixture.path, "--json").stdout) as { runs: RunSummary[] };
    expect(fromPg.store).toContain(`(schema ${schema})`);
    // Start and end times are each store's own; everything else is the same.
    const strip = (runs: RunSummary[]): unknown => runs.map(({ startedAt: _s, endedAt: _e, ...r }) => r);
    expect(strip(fromPg.runs)).toEqual(strip(fromFile.runs));
    const view = JSON.parse(arbor("inspect", url, "g1-p0", "--json").stdout) as TrajectoryView;
    expect(view.turns[1]!.outputText).toBe(fixture.texts.output1);
    const r = arbor("export", url, "--format", "jsonl", "--out", join(dir, "pg-out"));
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`(${fixture.calls.length} calls)`);
  });
});
