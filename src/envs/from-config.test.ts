import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseRunConfig } from "../core/config.js";
import { environmentFromConfig, runTasks } from "./from-config.js";
import { checkEnvironmentShape } from "./module-environment.js";
import { loadSweTasks } from "./swe-mini/task-data.js";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "arbor-env-config-"));
  const env = `{ name: "mini", tasks: (n, s) => Array.from({ length: n }, (_, i) => ({ id: "m" + s + "-" + i, prompt: [{ role: "user", content: "hi" }], meta: {} })),
    tools: () => [{ name: "t", description: "d", run: async () => ({ ok: true, output: "" }) }], setup: async () => ({}), check: async () => ({ score: 0, detail: "" }),
    golden: (t) => t.prompt, solveGolden: async () => "" }`;
  writeFileSync(join(dir, "object.mjs"), `export const env = ${env};\n`);
  writeFileSync(join(dir, "factory.mjs"), `export default (opts) => ({ ...${env}, hygiene: opts.hygiene });\n`);
  writeFileSync(join(dir, "throwing.mjs"), "export default () => { throw new Error('no config file'); };\n");
  writeFileSync(join(dir, "wrong.mjs"), `export default { ...${env}, check: 'yes' };\n`);
  writeFileSync(join(dir, "tasks.jsonl"), [0, 1, 2].map((i) => JSON.stringify({ id: `f${i}`, prompt: [{ role: "user", content: `q${i}` }], meta: {} })).join("\n"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ENGINES = [{ name: "e0" }];
const envCfg = (env: Record<string, unknown>) => parseRunConfig({ engines: ENGINES, env }).env;

describe("environment from the config", () => {
  it("loads a module's Environment object by name, or calls its default-export factory with the options", async () => {
    expect((await environmentFromConfig(envCfg({ module: `${join(dir, "object.mjs")}#env` }))).name).toBe("mini");
    const made = await environmentFromConfig(envCfg({ module: join(dir, "factory.mjs"), hygiene: { zeroRewardOnViolation: false } }));
    expect(made.hygiene).toEqual({ zeroRewardOnViolation: false, stopOnViolation: false });
    expect((await environmentFromConfig(envCfg({ name: "search-qa" }))).name).toBe("search-qa");
  });

  it("refuses a module that is not an Environment, naming the field", async () => {
    const err = (m: string) => environmentFromConfig(envCfg({ module: m })).then(() => "", (e: Error) => e.message);
    expect(await err(join(dir, "wrong.mjs"))).toMatch(/^env\.module .*wrong\.mjs: not an Environment: 'check' must be a function \(got string "yes"\)$/);
    expect(await err(join(dir, "throwing.mjs"))).toMatch(/throwing\.mjs: the factory threw: no config file$/);
    expect(await err(`${join(dir, "object.mjs")}#nothing`)).toMatch(/has no export 'nothing' \(exports: env\)$/);
    expect(await err(join(dir, "missing.ts"))).toMatch(/^env\.module: module .*missing\.ts not found/);
    const base = { name: "x", tasks: () => [], tools: () => [], setup: () => 0, check: () => 0, golden: () => [], solveGolden: () => 0 };
    expect(() => checkEnvironmentShape(42, "m")).toThrow("m: not an Environment: expected an object, got number 42");
    expect(() => checkEnvironmentShape({ ...base, name: "" }, "m")).toThrow(`'name' must be a non-empty string (got string "")`);
    expect(() => checkEnvironmentShape({ ...base, tools: () => [{ name: "bad name", description: "", run: () => 0 }] }, "m")).toThrow("tools()[0].name must be a tool name like 'calc'");
    expect(() => checkEnvironmentShape({ ...base, tools: () => [{ name: "ok", description: "" }] }, "m")).toThrow("tools()[0].run must be a function (got undefined)");
    expect(() => checkEnvironmentShape({ ...base, taskCount: -1 }, "m")).toThrow("'taskCount' must be an integer >= 0 when given");
    expect(() => checkEnvironmentShape({ ...base, variants: [] }, "m")).toThrow("'variants' must be a function when given (got an array)");
  });

  it("gives each iteration env.tasks drawn tasks, or the next perIteration tasks of a file, wrapping around", async () => {
    const counted = envCfg({ name: "calc", tasks: 2, seed: 5 });
    const env = await environmentFromConfig(counted);
    expect(await runTasks(env, counted, 3)).toMatchObject({ tasks: env.tasks(6, 5), perIteration: 2 });
    const filed = envCfg({ module: `${join(dir, "object.mjs")}#env`, tasks: join(dir, "tasks.jsonl"), perIteration: 2 });
    const fromFile = await runTasks(await environmentFromConfig(filed), filed, 3);
    expect(fromFile.perIteration).toBe(2);
    expect(fromFile.tasks.map((t) => t.id)).toEqual(["f0", "f1", "f2", "f0", "f1", "f2"]);
    const whole = envCfg({ module: `${join(dir, "object.mjs")}#env`, tasks: join(dir, "tasks.jsonl") });
    expect((await runTasks(await environmentFromConfig(whole), whole, 2)).tasks.map((t) => t.id)).toEqual(["f0", "f1", "f2", "f0", "f1", "f2"]);
  });

  it("holds out the last eval.tasks tasks of a file, or drawn tasks after the training ones for a count", async () => {
    const filed = envCfg({ module: `${join(dir, "object.mjs")}#env`, tasks: join(dir, "tasks.jsonl") });
    const env = await environmentFromConfig(filed);
    const r = await runTasks(env, filed, 2, 1);
    expect([r.tasks.map((t) => t.id), r.heldOut.map((t) => t.id), r.perIteration]).toEqual([["f0", "f1", "f0", "f1"], ["f2"], 2]);
    await expect(runTasks(env, filed, 1, 3)).rejects.toThrow(/^eval\.tasks: .*tasks\.jsonl has 3 tasks; holding out 3 leaves none to train on$/);
    writeFileSync(join(dir, "same.jsonl"), ["a", "b"].map((id) => JSON.stringify({ id, prompt: [{ role: "user", content: "same" }], meta: {} })).join("\n"));
    const same = envCfg({ module: `${join(dir, "object.mjs")}#env`, tasks: join(dir, "same.jsonl") });
    await expect(runTasks(env, same, 1, 1)).rejects.toThrow("eval.tasks: held-out task 'b' (of the last 1 in");
    const counted = envCfg({ name: "calc", tasks: 2, seed: 5 });
    const calc = await environmentFromConfig(counted);
    const c = await runTasks(calc, counted, 2, 3);
    expect(c.tasks).toEqual(calc.tasks(4, 5));
    expect(c.heldOut).toHaveLength(3);
    expect(c.heldOut.some((h) => c.tasks.some((t) => JSON.stringify(t.prompt) === JSON.stringify(h.prompt)))).toBe(false);
  });

  it("keeps a resumed run's held-out tasks where it drew them: more iterations train on the tasks after them", async () => {
    const counted = envCfg({ name: "calc", tasks: 2, seed: 5 });
    const calc = await environmentFromConfig(counted);
    const first = await runTasks(calc, counted, 2, 3);
    const more = await runTasks(calc, counted, 4, 3, 2);
    // The same held-out tasks and the same first two iterations; the two new ones after the held-out draw.
    expect(more.heldOut).toEqual(first.heldOut);
    expect(more.tasks.slice(0, 4)).toEqual(first.tasks);
    expect(more.tasks).toHaveLength(8);
    const held = new Set(first.heldOut.map((t) => JSON.stringify(t.prompt)));
    expect(more.tasks.some((t) => held.has(JSON.stringify(t.prompt)))).toBe(false);
    const ids = calc.tasks(64, 5).map((t) => t.id);
    const lastHeld = Math.max(...first.heldOut.map((t) => ids.indexOf(t.id)));
    for (const t of more.tasks.slice(4)) expect(ids.indexOf(t.id)).toBeGreaterThan(lastHeld);
    // Fewer iterations than the placement: a prefix of the same tasks, the held-out ones unmoved.
    const fewer = await runTasks(calc, counted, 1, 3, 2);
    expect([fewer.tasks, fewer.heldOut]).toEqual([first.tasks.slice(0, 2), first.heldOut]);
  });

  it("reads a folder of swe-mini task folders (arbor validate's filtered output) for swe-mini only", async () => {
    const folder = join(import.meta.dirname, "swe-mini/tasks");
    const cfg = envCfg({ name: "swe-mini", tasks: folder, perIteration: 2 });
    const env = await environmentFromConfig(cfg);
    const { tasks } = await runTasks(env, cfg, 1);
    expect(tasks).toHaveLength(2);
    expect(loadSweTasks(folder).map((t) => t.id)).toContain(tasks[0]!.meta.sweTask);
    await expect(environmentFromConfig(envCfg({ name: "calc", tasks: folder }))).rejects.toThrow(/is a folder; a folder of task folders is read for env swe-mini only/);
  });

  it("refuses perIteration without a task file", () => {
    expect(() => parseRunConfig({ engines: ENGINES, env: { tasks: 3, perIteration: 2 } })).toThrow("env.perIteration: perIteration needs a task file (env.tasks: <path>)");
  });
});
