// The CLI's user-facing failures: one line naming the problem, non-zero exit, no stack trace.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { closedPort } from "../testing/closed-port.js";

const root = join(import.meta.dirname, "../..");

function arbor(configText: string): { status: number | null; stderr: string; stdout: string } {
  const dir = mkdtempSync(join(tmpdir(), "arbor-cli-"));
  const p = join(dir, "c.yaml");
  writeFileSync(p, configText);
  const r = spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), "run", p, "--no-progress"], {
    cwd: dir,
    encoding: "utf8",
    timeout: 60_000,
  });
  return { status: r.status, stderr: r.stderr, stdout: r.stdout };
}

function expectOneLineError(r: { status: number | null; stderr: string }, pattern: RegExp): void {
  expect(r.status).not.toBe(0);
  expect(r.status).not.toBeNull();
  // Status lines (what was started where) may precede the error; nothing else may.
  const lines = r.stderr.trim().split("\n").filter((l) => !/^(policy|engine|gateway|sandbox) {2,}/.test(l));
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^arbor: error: /);
  expect(lines[0]).toMatch(pattern);
  expect(r.stderr).not.toMatch(/\n\s+at /);
}

describe("arbor run errors", () => {
  it("bad config: names the field and the reason", () => {
    expectOneLineError(arbor("engines: [{name: e0}]\nrollout: {groupSize: -2}\n"), /rollout\.groupSize: .*>=\s*1/);
  });

  it("unknown backend type: names it and lists the known ones", () => {
    expectOneLineError(
      arbor("backends: [{name: b0, type: tgi, url: 'http://127.0.0.1:9/v1'}]\n"),
      /backends\[0\]\.type: .*builtin/,
    );
  });

  it("engine down at start: names the backend and its url", async () => {
    const port = await closedPort();
    const r = arbor(`backends: [{name: remote-0, type: builtin, url: 'http://127.0.0.1:${port}/v1'}]\n`);
    expectOneLineError(r, new RegExp(`backend 'remote-0' at http://127\\.0\\.0\\.1:${port}/v1 is not reachable`));
  });

  it("gateway auth without its admin token in the environment", () => {
    expectOneLineError(
      arbor("engines: [{name: e0}]\ngateway: {auth: {adminTokenEnv: ARBOR_TEST_NO_SUCH_TOKEN}}\n"),
      /gateway\.auth: set ARBOR_TEST_NO_SUCH_TOKEN to an admin token of at least 16 characters/,
    );
  });

  it("async rollout mode without train: names `train`, starts nothing", () => {
    const r = arbor("engines: [{name: e0}]\nrollout: {mode: async}\n");
    expectOneLineError(r, /rollout\.mode: 'async' needs `train`/);
    expect(r.stderr).not.toMatch(/^(engine|gateway) /m);
  });

  it("unknown routing preset or scorer: names the field and the known ones, starts nothing", () => {
    const r = arbor("engines: [{name: e0}]\ngateway: {routing: stiky}\n");
    expectOneLineError(r, /gateway\.routing: unknown preset 'stiky' \(known: least-load, kv-usage, sticky-program/);
    expect(r.stderr).not.toMatch(/^(engine|gateway) /m);
    const s = arbor("engines: [{name: e0}]\ngateway: {routing: {scorers: [{name: nope, weight: 1}]}}\n");
    expectOneLineError(s, /gateway\.routing\.scorers\[0\]: unknown scorer 'nope'/);
    expect(s.stderr).not.toMatch(/^(engine|gateway) /m);
  });

  it("unknown estimator or a misspelt estimator option: names it, starts nothing (not after the first rollout)", () => {
    const r = arbor("engines: [{name: e0}]\ntrain: {estimator: grpoo}\n");
    expectOneLineError(r, /train\.estimator: unknown estimator 'grpoo' \(known: grpo, /);
    expect(r.stderr).not.toMatch(/^(engine|gateway) /m);
    const s = arbor("engines: [{name: e0}]\ntrain: {estimator: grpo, estimatorOptions: {positivOnly: true}}\n");
    expectOneLineError(s, /train\.estimatorOptions\.positivOnly: not an option of estimator 'grpo'/);
    expect(s.stderr).not.toMatch(/^(engine|gateway) /m);
  });

  it("a model.path that is not there, or a folder: names model.path, starts nothing, leaves no output folder", () => {
    const out = join(mkdtempSync(join(tmpdir(), "arbor-cli-model-")), "out");
    const r = arbor(`engines: [{name: e0}]\nmodel: {path: /nonexistent/m.gguf}\noutput: {dir: ${out}}\n`);
    expectOneLineError(r, /^arbor: error: model\.path: \/nonexistent\/m\.gguf does not exist \(a GGUF file\)$/);
    expect(r.stderr).not.toMatch(/^(engine|gateway) /m);
    expect(existsSync(out)).toBe(false);
    expectOneLineError(arbor(`engines: [{name: e0}]\nreward: {custom: ./missing-reward.ts}\noutput: {dir: ${out}}\n`), /missing-reward/);
    expect(existsSync(out)).toBe(false);
    expectOneLineError(arbor(`engines: [{name: e0}]\nmodel: {path: ${tmpdir()}}\n`), /^arbor: error: model\.path: .* is a folder, not a GGUF file/);
  });

  it("a cost profile no cost model has: names engines[i].costProfile and the profiles there are, starts nothing", () => {
    const out = join(mkdtempSync(join(tmpdir(), "arbor-cli-cost-")), "out");
    const r = arbor(`engines: [{name: e0}, {name: e1, executor: costmodel, costProfile: llama-3-8b/h999}]\noutput: {dir: ${out}}\n`);
    expectOneLineError(r, /^arbor: error: engines\[1\]\.costProfile: no cost profile 'llama-3-8b\/h999' \(known: llama-3-8b\/h100, .*\)$/);
    expect(r.stderr).not.toMatch(/^(engine|gateway) /m);
    expect(existsSync(out)).toBe(false);
  });

  it("an option of another mode is refused, not ignored: sim's --reproduction options, validate's judge options", () => {
    const cmd = (...args: string[]): { status: number | null; stderr: string } => spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), ...args], { encoding: "utf8", timeout: 60_000 });
    expectOneLineError(cmd("sim", "seer-moonlight", "--scale", "0.02", "--reuse"), /^arbor: error: --reuse applies with --reproduction only$/);
    expectOneLineError(cmd("sim", "seer-moonlight", "--scale", "0.02", "--doc", "x.md"), /^arbor: error: --doc applies with --reproduction only$/);
    expectOneLineError(cmd("validate", "calc", "--judge-min-approvals", "2"), /^arbor: error: --judge-min-approvals applies to the judge panel: give --judge <model> too$/);
  });

  it("a bad ARBOR_LOG_LEVEL or ARBOR_LOG_FORMAT is refused by every command, not only those that log", () => {
    const cmd = (env: Record<string, string>, ...args: string[]): { status: number | null; stderr: string } =>
      spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), ...args], { encoding: "utf8", timeout: 60_000, env: { ...process.env, ...env } });
    expectOneLineError(cmd({ ARBOR_LOG_LEVEL: "bogus" }, "validate", "/nonexistent"), /^arbor: error: ARBOR_LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent, got 'bogus'$/);
    expectOneLineError(cmd({ ARBOR_LOG_FORMAT: "xml" }, "inspect", "/nonexistent"), /^arbor: error: ARBOR_LOG_FORMAT: must be one of text, json, got 'xml'$/);
  });

  it("missing config file", () => {
    const r = spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), "run", "/nonexistent.yaml"], { encoding: "utf8" });
    expectOneLineError({ status: r.status, stderr: r.stderr }, /no such file/);
  });

  it("--continue without a config file, or beside --resume", () => {
    const run = (...args: string[]): { status: number | null; stderr: string } => spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), "run", ...args], { encoding: "utf8" });
    expectOneLineError(run("--continue"), /arbor run: give a config file with --continue$/);
    expectOneLineError(run("c.yaml", "--continue", "--resume", "out"), /give --continue \(the config's output\.dir\) or --resume <run dir>, not both/);
  });

  it("an output folder that is a file: names the field or option, before any work (sim, validate, run)", () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-cli-out-"));
    const file = join(dir, "a-file");
    writeFileSync(file, "x");
    const cmd = (...args: string[]): { status: number | null; stderr: string } => spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), ...args], { cwd: dir, encoding: "utf8", timeout: 60_000 });
    const fileMessage = (field: string) => new RegExp(`${field.replace(/[.]/g, "\\.")}: cannot use ${file} as the output folder: it is a file, not a folder$`);
    // A whole simulation used to run before the folder failed.
    const sim = cmd("sim", "seer-moonlight", "--systems", "verl-like", "--scale", "0.02", "--out", file, "--no-progress");
    expectOneLineError(sim, fileMessage("--out"));
    expectOneLineError(cmd("validate", join(root, "examples/flawed-dataset/calc-tasks.jsonl"), "--out", file), fileMessage("--out"));
    expectOneLineError(arbor(`engines: [{name: e0}]\noutput: {dir: ${file}}\n`), fileMessage("output.dir"));
  });
});
