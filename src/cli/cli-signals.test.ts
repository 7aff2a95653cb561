// Nothing lost on Ctrl-C: an interrupted `arbor run` ends every program it created with a recorded
// outcome, removes every sandbox, and exits with one line and status 130 (143 on SIGTERM). Nothing left active after
// SIGKILL either: the next run to open the store ends the killed run's programs as aborted.
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { expect, it } from "vitest";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";

const root = join(import.meta.dirname, "../..");

/** A folder with a small calc run's config (c.yaml), its sandbox root (sb) and output (out). */
function runDir(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `arbor-${name}-`));
  chmodSync(dir, 0o755);
  writeFileSync(
    join(dir, "c.yaml"),
    [
      `name: ${name}`,
      "engines: [{name: e0, sequences: 2, contextSize: 1024}]",
      "env: {name: calc, tasks: 16, seed: 1}",
      "rollout: {groupSize: 4, concurrency: 2}",
      "agent: {maxTurns: 4, maxTokensPerCall: 64, maxTotalTokens: 256}",
      `sandbox: {root: ${join(dir, "sb")}}`,
      `output: {dir: ${join(dir, "out")}}`,
    ].join("\n"),
  );
  return dir;
}

it.each([
  ["SIGINT", 130],
  ["SIGTERM", 143],
] as const)("%s mid-run: every program ends recorded, no sandbox left, exit %i", async (signal, status) => {
  const dir = runDir(signal.toLowerCase());
  const cfgPath = join(dir, "c.yaml");
  const child = spawn(process.execPath, [join(root, "bin/arbor.mjs"), "run", cfgPath, "--no-progress"], { cwd: root });
  let stderr = "";
  let interrupted = false;
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
    if (!interrupted && stderr.includes("gateway ")) {
      interrupted = true;
      // Let a few programs start, then interrupt.
      globalThis.setTimeout(() => child.kill(signal), 700);
    }
  });
  const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
  expect(interrupted).toBe(true);
  expect(code).toBe(status);
  const errors = stderr.split("\n").filter((l) => l.startsWith("arbor:"));
  expect(errors).toHaveLength(1);
  expect(errors[0]).toBe(`arbor: error: run aborted (received ${signal}); programs recorded as aborted in ${join(dir, "out", "store.sqlite")}`);

  const store = new SqliteTrajectoryStore(join(dir, "out", "store.sqlite"));
  try {
    const [run] = await store.listRuns();
    expect(run).toBeDefined();
    const stats = await store.stats(run!.id);
    expect(stats.programs).toBe(64);
    expect(stats.unfinished).toBe(0);
    expect(stats.rewarded).toBe(64);
    expect(stats.terminations.aborted).toBeGreaterThan(0);
  } finally {
    await store.close();
  }
  expect(readdirSync(join(dir, "sb"))).toEqual([]);
}, 120_000);

it("SIGKILL mid-rollout: the next run to open the store ends the programs left active as aborted and finishes the run", async () => {
  const dir = runDir("sigkill");
  const cfgPath = join(dir, "c.yaml");
  const storePath = join(dir, "out", "store.sqlite");
  const child = spawn(process.execPath, [join(root, "bin/arbor.mjs"), "run", cfgPath, "--no-progress"], { cwd: root });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on("exit", (_c, sig) => resolve(sig)));
  // Killed once programs are under way: some have been created at the gateway and not ended.
  const started = Date.now();
  let active = 0;
  while (active === 0 && Date.now() - started < 90_000) {
    await new Promise((r) => globalThis.setTimeout(r, 100));
    if (!stderr.includes("gateway ")) continue;
    const peek = new Database(storePath, { readonly: true, fileMustExist: true });
    try {
      active = (peek.prepare("SELECT count(*) AS n FROM programs WHERE termination_kind IS NULL").get() as { n: number }).n;
    } finally {
      peek.close();
    }
  }
  expect(active, stderr).toBeGreaterThan(0);
  child.kill("SIGKILL");
  expect(await exited).toBe("SIGKILL");

  const store = new SqliteTrajectoryStore(storePath);
  try {
    const [run] = await store.listRuns();
    expect(store.recovered.runs).toEqual([run!.id]);
    expect(store.recovered.programs.length).toBeGreaterThan(0);
    expect((await store.getRun(run!.id))?.endedAt).toBeGreaterThanOrEqual(started);
    const stats = await store.stats(run!.id);
    expect(stats.unfinished).toBe(0);
    expect(stats.terminations.aborted).toBe(store.recovered.programs.length);
    const ended = await store.getTrajectory(store.recovered.programs[0]!);
    expect(ended?.program.termination?.detail).toMatch(new RegExp(`^run '${run!.id}' ended without finishing: its process \\(pid ${child.pid} on .+\\) is gone`));
  } finally {
    await store.close();
  }
}, 120_000);

it("SIGTERM mid-SFT: stops after the current step, writes the weights so far, exits 143", async () => {
  const dir = mkdtempSync(join(tmpdir(), "arbor-sft-sigterm-"));
  const out = join(dir, "p.gguf");
  const args = ["sft", "--tasks", "8", "--steps", "1000", "--batch-size", "2", "--n-embd", "16", "--n-layer", "1", "--n-head", "2", "--n-ff", "32", "--no-progress", "--out", out];
  const child = spawn(process.execPath, [join(root, "bin/arbor.mjs"), ...args], { cwd: root });
  let stderr = "";
  let stdout = "";
  let stopped = false;
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
    // The held-out line comes every 20 steps: training is under way.
    if (!stopped && stderr.includes("sft step 20/1000")) {
      stopped = true;
      child.kill("SIGTERM");
    }
  });
  const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
  expect(stopped).toBe(true);
  expect(code).toBe(143);
  const steps = Number(/steps\s+(\d+) of 1000 \(stopped by SIGTERM/.exec(stdout)?.[1]);
  expect(steps).toBeGreaterThanOrEqual(20);
  expect(steps).toBeLessThan(1000);
  const { readGguf } = await import("../model/gguf.js");
  expect(JSON.parse(readGguf(out).metadata.get("arbor.sft") as string)).toMatchObject({ step: steps, steps: 1000 });
}, 120_000);
