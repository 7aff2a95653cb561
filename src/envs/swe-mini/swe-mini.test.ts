import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseToolCalls } from "../../model/markup.js";
import { createBwrapProvider, type BwrapProvider } from "../../sandbox/bwrap.js";
import type { Sandbox } from "../../sandbox/sandbox.js";
import type { Tool } from "../env.js";
import { buggyFiles, createSweMiniEnvironment } from "./swe-mini.js";
import { loadSweTasks } from "./task-data.js";

const env = createSweMiniEnvironment();
const tool = (name: string): Tool => env.tools().find((t) => t.name === name)!;
const variant = (id: string) => env.variants!().find((v) => v.id === id)!;
let root: string;
let provider: BwrapProvider;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "arbor-swe-mini-"));
  chmodSync(root, 0o755);
  provider = createBwrapProvider({ root, limits: { cpuSeconds: 20, memoryMb: 4096, wallMs: 30_000 } });
});

afterAll(async () => {
  await provider.destroyAll();
  rmSync(root, { recursive: true, force: true });
});

function allFiles(dir: string, rel = ""): string[] {
  return readdirSync(join(dir, rel), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? allFiles(dir, join(rel, e.name)) : [join(rel, e.name)],
  );
}

const task = env.tasks(24, 0).find((t) => t.meta.sweTask === "lru-recency")!;
const data = loadSweTasks().find((t) => t.id === "lru-recency")!;

describe("swe-mini tasks", () => {
  it("at least 20 tasks, in a seeded order, each with an issue, a golden patch and hidden tests", () => {
    const all = loadSweTasks();
    expect(all.length).toBeGreaterThanOrEqual(20);
    expect(new Set(all.map((t) => t.package)).size).toBe(all.length);
    const a = env.tasks(all.length, 3);
    expect(env.tasks(all.length, 3)).toEqual(a);
    expect(env.tasks(all.length, 4).map((t) => t.id)).not.toEqual(a.map((t) => t.id));
    expect(new Set(a.map((t) => t.id)).size).toBe(all.length);
    expect(() => env.tasks(all.length + 1, 3)).toThrow(/only \d+ exist/);
    for (const t of all) {
      expect(t.fixPatch).toMatch(/^--- a\/src\/index\.js\n\+\+\+ b\/src\/index\.js\n@@ /);
      expect(t.hiddenTest).toContain('from "@PKG@/src/index.js"');
      expect(t.hiddenTests).toBeGreaterThanOrEqual(2);
    }
    expect(task.prompt[1]!.content).toBe(`Issue in little-lru: ${data.title}\n\n${data.issue}`);
  });
});

describe("swe-mini in a bwrap sandbox", () => {
  it("set-up plants the bug, removes the patch backup that holds the fix and never ships the hidden tests", async () => {
    const sb = await provider.create("setup");
    const report = await env.setup(task, sb);
    const ws = sb.hostWorkspace;
    expect(readFileSync(join(ws, "repo/src/index.js"), "utf8")).toBe(buggyFiles(data)["src/index.js"]);
    expect(report.cleanup?.removed).toEqual(["repo/src/index.js.orig"]);
    expect(report.cleanup?.diff).toEqual({ added: [], removed: ["repo/src/index.js.orig"], changed: [] });
    const files = allFiles(ws).sort();
    expect(files).toEqual([
      ".grader/hidden.test.mjs",
      "repo/README.md",
      "repo/node_modules/mini-expect/index.js",
      "repo/node_modules/mini-expect/package.json",
      "repo/package.json",
      "repo/src/index.js",
      "repo/test/basic.test.mjs",
    ]);
    for (const f of files) expect(readFileSync(join(ws, f), "utf8")).not.toContain("get refreshes recency");
    const run = await tool("run").run("node --test test/", sb);
    expect(run.ok).toBe(true);
    await sb.destroy();
  });

  it("applies variants and perturbations: dependency versions, removal, env vars, an unreachable registry", async () => {
    const sb = await provider.create("variants");
    expect(await env.setup(task, sb, { variant: variant("dev-dependency-removed") })).toMatchObject({ variant: "dev-dependency-removed" });
    expect(existsSync(join(sb.hostWorkspace, "repo/node_modules/mini-expect"))).toBe(false);
    const broken = await tool("run").run("node --test test/", sb);
    expect(broken.ok).toBe(false);
    expect(broken.output).toMatch(/Cannot find package 'mini-expect'/);
    await sb.destroy();

    const sb2 = await provider.create("variants2");
    await env.setup(task, sb2, { variant: variant("mini-expect-2") });
    expect(JSON.parse(readFileSync(join(sb2.hostWorkspace, "repo/node_modules/mini-expect/package.json"), "utf8")).version).toBe("2.0.1");
    expect((await tool("run").run("node --test test/", sb2)).ok).toBe(true);
    await sb2.destroy();

    const sb3 = await provider.create("variants3");
    await env.setup(task, sb3, { variant: variant("registry-unreachable") });
    expect(readFileSync(join(sb3.hostWorkspace, "repo/.npmrc"), "utf8")).toBe("registry=http://127.0.0.1:9/\n");
    const probe = await tool("run").run(
      // net, not fetch: undici's wasm parser needs more address space than the sandbox allows.
      `node -e "const u = new URL(process.env.npm_config_registry); require('net').connect(Number(u.port), u.hostname).on('connect', () => console.log('answered')).on('error', (e) => console.log('no answer', e.code))"`,
      sb3,
    );
    expect(probe.output).toMatch(/no answer (ECONNREFUSED|ENETUNREACH)/);
    await sb3.destroy();

    const sb4 = await provider.create("variants4");
    await env.setup(task, sb4, { variant: variant("tz-new-york") });
    expect((await tool("run").run(`node -e "console.log(process.env.TZ)"`, sb4)).output).toBe("exit code 0\n--- stdout ---\nAmerica/New_York\n");
    await sb4.destroy();
  });

  it("tools list, read, write, edit and run inside the sandbox; failed edits change nothing", async () => {
    const sb = await provider.create("tools");
    await env.setup(task, sb);
    expect((await tool("list_files").run("", sb)).output).toBe("README.md\npackage.json\nsrc/index.js\ntest/basic.test.mjs");
    const src = await tool("read_file").run("src/index.js", sb);
    expect(src).toEqual({ ok: true, output: buggyFiles(data)["src/index.js"] });
    expect(await tool("read_file").run("nope.js", sb)).toEqual({ ok: false, output: "read_file: nope.js: no such file" });
    expect(await tool("write_file").run("scratch/t.mjs\nconsole.log(6 * 7)", sb)).toEqual({ ok: true, output: "wrote scratch/t.mjs (1 lines)" });
    expect(await tool("run").run("node scratch/t.mjs", sb)).toEqual({ ok: true, output: "exit code 0\n--- stdout ---\n42\n" });
    expect(await tool("run").run("cat src/index.js", sb)).toMatchObject({ ok: false, output: expect.stringMatching(/only node commands/) });
    const bad = await tool("edit_file").run("--- a/src/index.js\n+++ b/src/index.js\n@@ -1,1 +1,1 @@\n-no such line\n+x", sb);
    expect(bad).toMatchObject({ ok: false, output: expect.stringMatching(/hunk 1 \(@@ -1\) does not apply/) });
    expect((await tool("read_file").run("src/index.js", sb)).output).toBe(src.output);
    const sr = await tool("edit_file").run(
      "src/index.js\n<<<<<<< SEARCH\n    return this.map.get(key);\n=======\n    const v = this.map.get(key);\n    this.map.delete(key);\n    this.map.set(key, v);\n    return v;\n>>>>>>> REPLACE",
      sb,
    );
    expect(sr).toEqual({ ok: true, output: "applied: src/index.js" });
    expect(await env.check(task, { finalAnswer: "done", sandbox: sb })).toEqual({ score: 1, detail: "3/3 hidden tests passed" });
    expect(env.hygieneRecord!(sb).violations).toEqual([]);
    await sb.destroy();
  });

  it("the golden conversation's tool outputs are what the tools really print", async () => {
    const sb = await provider.create("golden");
    await env.setup(task, sb);
    const g = env.golden(task);
    for (let i = 2; i < g.length - 1; i += 2) {
      const call = parseToolCalls(g[i]!.content).calls[0]!;
      expect(g[i + 1]).toEqual({ role: "tool", name: call.name, content: (await tool(call.name).run(call.input, sb)).output });
    }
    expect(await env.check(task, { finalAnswer: g[g.length - 1]!.content, sandbox: sb })).toMatchObject({ score: 1 });
    await sb.destroy();
  });

  it("hidden tests need every case to pass: a package that exits early fails, and the tests leave no trace", async () => {
    const sb = await provider.create("sabotage");
    await env.setup(task, sb);
    await tool("write_file").run("src/index.js\nprocess.exit(0);", sb);
    const r = await env.check(task, { finalAnswer: "", sandbox: sb });
    expect(r.score).toBe(0);
    expect(r.detail).toMatch(/^(no test summary|0\/3 hidden tests passed)/);
    expect(readdirSync(sb.hostWorkspace).filter((n) => n.startsWith(".arbor-eval"))).toEqual([]);
    // A package that prints a fake summary and exits before the tests run.
    await tool("write_file").run('src/index.js\nconsole.log("# tests 3\\n# pass 3\\n# fail 0"); process.exit(0);', sb);
    expect((await tool("run").run("node src/index.js", sb)).output).toContain("# pass 3\n# fail 0");
    expect(await env.check(task, { finalAnswer: "", sandbox: sb })).toMatchObject({ score: 0 });
    await expect(env.check(task, { finalAnswer: "" })).rejects.toThrow(/needs the program's sandbox/);
    await sb.destroy();
  });
});

describe("swe-mini hygiene", () => {
  it("an agent reading the grader decoy or editing the visible tests is recorded", async () => {
    const sb: Sandbox = await provider.create("hyg");
    await env.setup(task, sb);
    await tool("read_file").run("../.grader/hidden.test.mjs", sb);
    await tool("edit_file").run("test/basic.test.mjs\n<<<<<<< SEARCH\ntest(\n=======\ntest.skip(\n>>>>>>> REPLACE", sb);
    await tool("run").run(`node -e "require('fs').readdirSync('/workspace/.grader').forEach(f => require('fs').readFileSync('/workspace/.grader/' + f))"`, sb);
    const v = env.hygieneRecord!(sb).violations.map((x) => `${x.tool} ${x.mode} ${x.path}`);
    expect(v).toEqual([
      "read_file read /workspace/.grader/hidden.test.mjs",
      "edit_file write /workspace/repo/test/basic.test.mjs",
      "run read /workspace/.grader/hidden.test.mjs",
    ]);
    await sb.destroy();
  });
});
