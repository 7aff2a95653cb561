import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadDataset } from "./dataset.js";
import { parseJudges } from "./validate-command.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-dataset-test-"));
function jsonl(name: string, lines: unknown[]): string {
  const p = join(dir, name);
  writeFileSync(p, lines.map((l) => (typeof l === "string" ? l : JSON.stringify(l))).join("\n"));
  return p;
}
const prompt = [{ role: "user", content: "What is 1+1?" }];

describe("validate datasets", () => {
  it("reads an environment's own tasks and writes the kept ones as JSONL", () => {
    const d = loadDataset("calc", { count: 3, seed: 5 });
    expect(d.env.name).toBe("calc");
    expect(d.tasks.map((t) => t.task.id)).toEqual(["calc-5-0", "calc-5-1", "calc-5-2"]);
    expect(d.tasks[0]?.tests).toMatch(/^The checker compares the final answer with this task data: \{"expression":/);
    const out = d.writeFiltered(new Set(["calc-5-1"]), join(dir, "out", d.filteredName));
    const lines = readFileSync(out, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { id: string; env: string });
    expect(lines.map((l) => [l.env, l.id])).toEqual([["calc", "calc-5-1"]]);
  });
  it("reads JSONL tasks with their own golden answers and keeps the kept lines verbatim", () => {
    const p = jsonl("ok.jsonl", [{ id: "a", env: "calc", prompt, meta: { expression: "1+1", answer: 2 }, golden: "Answer: 2" }, "", { id: "b", prompt, meta: { expression: "1+2", answer: 3 } }]);
    const d = loadDataset(p, { env: "calc" });
    expect(d.tasks.map((t) => [t.task.id, t.golden])).toEqual([["a", "Answer: 2"], ["b", undefined]]);
    const out = d.writeFiltered(new Set(["a"]), join(dir, "ok.filtered.jsonl"));
    expect(readFileSync(out, "utf8")).toBe(`${readFileSync(p, "utf8").split("\n")[0]}\n`);
  });
  it("names the line and the field of a bad JSONL task", () => {
    const bad = (name: string, lines: unknown[]) => () => loadDataset(jsonl(name, lines));
    expect(bad("a.jsonl", ["{nope"])).toThrow(/a.jsonl:1: not JSON/);
    expect(bad("b.jsonl", [{ id: "x", prompt, meta: {} }])).toThrow(/b.jsonl:1: names no environment \(give "env" or --env\)/);
    expect(bad("c.jsonl", [{ id: "x", env: "calc", prompt: "hi", meta: {} }])).toThrow(/c.jsonl:1: prompt must be a list of \{role, content\} messages/);
    expect(bad("d.jsonl", [{ id: "x", env: "calc", prompt, meta: {} }, { id: "x", env: "calc", prompt, meta: {} }])).toThrow(/d.jsonl:2: duplicate task id 'x'/);
    expect(bad("e.jsonl", [{ id: "x", env: "calc", prompt, meta: {} }, { id: "y", env: "swe-mini", prompt, meta: {} }])).toThrow(/e.jsonl:2: env 'swe-mini' differs from earlier lines' 'calc'/);
    expect(bad("f.jsonl", [{ id: "x", env: "nope", prompt, meta: {} }])).toThrow(/unknown environment 'nope'/);
  });
  it("reads a folder of swe-mini task folders, files beside them left out; names a folder that is no task and what it lacks", () => {
    const tasks = join(dir, "swe-tasks");
    cpSync(join(import.meta.dirname, "../../examples/flawed-dataset/tasks/slugify-trim"), join(tasks, "slugify-trim"), { recursive: true });
    writeFileSync(join(tasks, "README.md"), "my tasks\n");
    expect(loadDataset(tasks).tasks.map((t) => t.task.id)).toEqual(["swe-mini-slugify-trim"]);
    const junk = join(dir, "junk");
    mkdirSync(join(junk, "sub"), { recursive: true });
    expect(() => loadDataset(junk)).toThrow(`swe-mini: ${join(junk, "sub")} is not a task folder: it has no task.json`);
    const broken = join(dir, "broken-tasks");
    cpSync(tasks, broken, { recursive: true });
    rmSync(join(broken, "slugify-trim", "fix.patch"));
    expect(() => loadDataset(broken)).toThrow(`swe-mini: ${join(broken, "slugify-trim")} is not a task folder: it has no fix.patch`);
  });

  it("refuses an option that would not apply rather than ignoring it", () => {
    const p = jsonl("opts.jsonl", [{ id: "a", env: "calc", prompt, meta: { expression: "1+1", answer: 2 } }]);
    expect(() => loadDataset(p, { count: 2 })).toThrow(`validate: --tasks applies to an environment's own tasks; ${p} is a dataset, validated whole`);
    expect(() => loadDataset(p, { seed: 5 })).toThrow(`validate: --seed applies to an environment's own tasks`);
    expect(() => loadDataset("calc", { env: "swe-mini" })).toThrow("validate: --env names the environment of JSONL lines that name none; 'calc' is an environment itself");
    expect(() => loadDataset(dir, { env: "calc" })).toThrow(/validate: --env names the environment of a \.jsonl file's lines; .* is a folder/);
  });

  it("parses judge specs and names a judge without a gateway", () => {
    const parsed = parseJudges(["m1", "m2@http://127.0.0.1:9/", "m3"], "http://127.0.0.1:8", undefined);
    expect(parsed.judges.map((j) => j.model)).toEqual(["m1", "m2", "m3"]);
    // One chat per gateway, shared by its judges.
    expect(parsed.chats).toHaveLength(2);
    expect(parsed.judges[2]!.chat).toBe(parsed.judges[0]!.chat);
    expect(() => parseJudges(["m1"], undefined, undefined)).toThrow("validate: judge 'm1' has no gateway: give --judge-gateway <url> or --judge m1@<url>");
    expect(() => parseJudges(["m1@ftp://x"], undefined, undefined)).toThrow(/gateway must be an http\(s\) URL/);
  });
});
