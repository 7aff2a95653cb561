// The `arbor` command's own surface: --version, a --help that loads no command's modules (from dist/ and from
// the sources alike), and `arbor run --set` overrides reaching the config check as settings in the file would.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { importTrace } from "../testing/import-trace.js";
import { arbor, repoRoot } from "../testing/validate-cli.js";

const run = promisify(execFile);
const { version } = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string };

// Packages that only a command's work needs; each is large or native, and `--help` must load none of them.
const HEAVY = ["@tensorflow/tfjs", "zod", "node-llama-cpp", "fastify", "better-sqlite3", "pg", "dockerode", "@kubernetes/client-node", "@nats-io/transport-node", "ioredis", "apache-arrow", "openai"];

/** Module URLs `arbor <args>` resolves (ARBOR_FROM_SOURCE=1: the TypeScript sources through tsx). */
async function tracedArbor(args: string[], fromSource: boolean): Promise<{ stdout: string; urls: string[] }> {
  const trace = importTrace();
  const env = { ...process.env, ...trace.env, ARBOR_FROM_SOURCE: fromSource ? "1" : "0" };
  const r = await run(process.execPath, [...trace.nodeArgs, join(repoRoot, "bin/arbor.mjs"), ...args], { cwd: repoRoot, env, timeout: 120_000 });
  return { stdout: r.stdout, urls: trace.urls() };
}

function heavyLoaded(urls: string[]): string[] {
  return HEAVY.filter((pkg) => urls.some((u) => u.includes(`/node_modules/${pkg}/`)));
}

describe("arbor", () => {
  it("--version and -V print package.json's version", async () => {
    for (const flag of ["--version", "-V"]) {
      const r = await arbor([flag]);
      expect(r.code).toBe(0);
      expect(r.stdout.trim()).toBe(version);
    }
  });

  for (const fromSource of [false, true]) {
    it(`--help lists the commands and loads commander, not the commands' modules (${fromSource ? "sources through tsx" : "dist/ where fresh"})`, async () => {
      const r = await tracedArbor(["--help"], fromSource);
      for (const cmd of ["run", "serve", "sft", "train-worker", "validate", "bench", "hf"]) expect(r.stdout).toMatch(new RegExp(`^  ${cmd} `, "m"));
      // The trace works: it saw commander and the command's own entry module.
      expect(r.urls.some((u) => u.includes("/node_modules/commander/"))).toBe(true);
      expect(r.urls.some((u) => /\/cli\/main\.(js|ts)$/.test(u))).toBe(true);
      expect(r.urls.filter((u) => /\/cli\/(run|sft|bench|hf|train-worker|serve-\w+)\.(js|ts)$/.test(u))).toEqual([]);
      expect(heavyLoaded(r.urls)).toEqual([]);
    });
  }

  it("a subcommand's --help loads none of its modules either, and `run --help` documents --set", async () => {
    const serve = await tracedArbor(["serve", "engine", "--help"], false);
    expect(serve.stdout).toContain("--cluster <file>");
    expect(heavyLoaded(serve.urls)).toEqual([]);
    const runHelp = await tracedArbor(["run", "--help"], false);
    expect(runHelp.stdout).toContain("--set <key=value>");
    expect(heavyLoaded(runHelp.urls)).toEqual([]);
  });

  it("running a command loads its modules: the trace sees the heavy packages `run` uses", async () => {
    // A bad --set fails after `run`'s module (engines, gateway, stores) has loaded, before anything starts.
    const trace = importTrace();
    const args = [...trace.nodeArgs, join(repoRoot, "bin/arbor.mjs"), "run", "examples/quickstart.yaml", "--set", "train.lr=fast"];
    const r = await run(process.execPath, args, { cwd: repoRoot, env: { ...process.env, ...trace.env } }).catch((e: { code: number }) => e);
    expect(r).toMatchObject({ code: 1 });
    expect(heavyLoaded(trace.urls())).toEqual(expect.arrayContaining(["node-llama-cpp", "fastify", "better-sqlite3"]));
  });
});

describe("arbor run --set", () => {
  const quickstart = "examples/quickstart.yaml";

  it("a value of the wrong type gets the config loader's one-line error, naming the path", async () => {
    const r = await arbor(["run", quickstart, "--no-progress", "--set", "train.lr=fast"]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(/^arbor: error: invalid config examples\/quickstart\.yaml: train\.lr: .*number/);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
  });

  it("an unknown path is refused as an unknown key of the file would be", async () => {
    const r = await arbor(["run", quickstart, "--no-progress", "--set", "train.learningRate=0.1"]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(/^arbor: error: invalid config examples\/quickstart\.yaml: train: .*learningRate/);
  });

  it("overrides apply in order, a later one winning", async () => {
    // The bad engines count is overridden by a good one; the env name is checked as the file's would be.
    const r = await arbor(["run", quickstart, "--no-progress", "--set", "engines.0.sequences=many", "--set", "engines.0.sequences=2", "--set", "env.name=chess"]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(/^arbor: error: invalid config examples\/quickstart\.yaml: env\.name: [^;]*$/);
  });

  it("an argument that is not key=value is one line naming it", async () => {
    const r = await arbor(["run", quickstart, "--no-progress", "--set", "train.lr"]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe("arbor: error: --set train.lr: expected key=value (e.g. train.lr=1e-4)");
  });
});
