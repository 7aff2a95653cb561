// The config's own-code and data paths (env.module, a task file in env.tasks, reward.custom) are relative to the
// config file; env.tasks stays a count when it is a number; reward.custom's short forms become {module, weight}.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRunConfig, parseRunConfig } from "./config.js";
import { loadClusterRunConfig, parseClusterConfig } from "./cluster-config.js";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "arbor-config-paths-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ENGINES = [{ name: "e0" }];

describe("config paths of your own code and data", () => {
  it("resolves env.module (keeping #export), a task file and reward.custom against the config's folder", () => {
    const path = join(dir, "run.yaml");
    writeFileSync(path, ["engines: [{ name: e0 }]", "env: { module: ./envs/mine.ts#shop, tasks: data/tasks.jsonl, perIteration: 2 }", "reward: { custom: [./r.mjs#score, { module: /abs/r.ts, name: brevity, weight: 0.2 }] }", "output: { dir: out }"].join("\n"));
    const cfg = loadRunConfig(path);
    expect(cfg.env.module).toBe(`${join(dir, "envs/mine.ts")}#shop`);
    expect(cfg.env.tasks).toBe(join(dir, "data/tasks.jsonl"));
    expect(cfg.env.perIteration).toBe(2);
    expect(cfg.reward.custom).toEqual([
      { module: `${join(dir, "r.mjs")}#score`, weight: 1 },
      { module: "/abs/r.ts", name: "brevity", weight: 0.2 },
    ]);
    // Other paths stay relative to the working directory, as before.
    expect(cfg.output.dir).toBe("out");
  });

  it("resolves agent.module against the config's folder, and refuses it for a black box", () => {
    const path = join(dir, "agent.yaml");
    writeFileSync(path, ["engines: [{ name: e0 }]", "agent: { module: ./agents/mine.ts#careful }", "output: { dir: out }"].join("\n"));
    expect(loadRunConfig(path).agent.module).toBe(`${join(dir, "agents/mine.ts")}#careful`);
    writeFileSync(path, ["engines: [{ name: e0 }]", "agent: { kind: black-box, command: [node, a.mjs], module: ./m.ts }", "output: { dir: out }"].join("\n"));
    expect(() => loadRunConfig(path)).toThrow(/agent\.module: applies to kind white-box only/);
  });

  it("leaves a count of tasks and configs without custom code as they were", () => {
    const path = join(dir, "plain.yaml");
    writeFileSync(path, "engines: [{ name: e0 }]\nenv: { name: calc, tasks: 5 }\n");
    const cfg = loadRunConfig(path);
    expect(cfg.env).toEqual({ name: "calc", tasks: 5, seed: 7 });
    expect(cfg.reward.custom).toBeUndefined();
  });

  it("resolves them in a config read with a cluster file too", () => {
    const path = join(dir, "cluster-run.yaml");
    writeFileSync(path, "env: { module: ./m.mjs, tasks: ./t.jsonl }\n");
    const cluster = parseClusterConfig({
      name: "c",
      store: { kind: "postgres", url: "postgres://postgres@db:5432/arbor" },
      engines: [{ name: "e0", host: "0.0.0.0", port: 8101 }],
      backends: [{ name: "e0", type: "builtin", url: "http://e0:8101/v1" }],
      gateway: { host: "0.0.0.0", port: 8100 },
    });
    const cfg = loadClusterRunConfig(path, cluster);
    expect([cfg.env.module, cfg.env.tasks]).toEqual([join(dir, "m.mjs"), join(dir, "t.jsonl")]);
  });

  it("refuses a bad custom reward entry or an empty module path, naming the field", () => {
    expect(() => parseRunConfig({ engines: ENGINES, reward: { custom: { module: "./r.ts", name: "Bad Name" } } })).toThrow("reward.custom.name: must be kebab-case, e.g. 'tool-success'");
    expect(() => parseRunConfig({ engines: ENGINES, reward: { custom: [] } })).toThrow(/reward\.custom/);
    expect(() => parseRunConfig({ engines: ENGINES, env: { module: "" } })).toThrow(/env\.module/);
    expect(() => parseRunConfig({ engines: ENGINES, env: { tasks: 0 } })).toThrow(/env\.tasks/);
  });
});
