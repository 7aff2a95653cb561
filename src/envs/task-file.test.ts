import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Field, Int64, List, Struct, Table, tableFromArrays, Utf8, vectorFromArray } from "apache-arrow";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeParquetFile } from "../batch/export-parquet.js";
import { loadDataset } from "../validate/dataset.js";
import { createCalcEnvironment } from "./calc/calc.js";
import { loadTaskFile } from "./task-file.js";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "arbor-task-file-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const prompt = [
  { role: "system", content: "Solve it." },
  { role: "user", content: "What is 6*7?" },
];

function file(name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

async function loadError(path: string, env?: string): Promise<string> {
  const e = await loadTaskFile(path, env).then(() => undefined, (x: unknown) => x);
  expect(e).toBeInstanceOf(Error);
  const msg = (e as Error).message;
  expect(msg).not.toContain("\n");
  return msg;
}

describe("task files", () => {
  it("reads JSONL tasks in file order, skipping blank lines", async () => {
    const p = file("t.jsonl", [JSON.stringify({ id: "a", prompt, meta: { answer: 42 } }), "", JSON.stringify({ id: "b", prompt, meta: {} })].join("\n"));
    expect(await loadTaskFile(p)).toEqual([
      { id: "a", prompt, meta: { answer: 42 } },
      { id: "b", prompt, meta: {} },
    ]);
  });

  it("reads the filtered dataset arbor validate writes (lines with env and golden)", async () => {
    const d = loadDataset("calc", { count: 5, seed: 3 });
    const keep = new Set(d.tasks.slice(1, 4).map((t) => t.task.id));
    const out = d.writeFiltered(keep, join(dir, d.filteredName));
    const tasks = await loadTaskFile(out, "calc");
    expect(tasks.map((t) => t.id)).toEqual([...keep]);
    expect(tasks).toEqual(createCalcEnvironment().tasks(5, 3).slice(1, 4));
    // The run's environment must be the one the lines name.
    expect(await loadError(out, "search-qa")).toMatch(/\.jsonl:1: env 'calc' is not the run's environment 'search-qa'$/);
  });

  it("names the line and the field of a bad task", async () => {
    const line2 = (v: unknown): string => file("bad.jsonl", `${JSON.stringify({ id: "ok", prompt, meta: {} })}\n${typeof v === "string" ? v : JSON.stringify(v)}\n`);
    expect(await loadError(line2("{nope"))).toMatch(/^env\.tasks: .*bad\.jsonl:2: not JSON/);
    expect(await loadError(line2({ prompt, meta: {} }))).toMatch(/bad\.jsonl:2: id must be a non-empty string$/);
    expect(await loadError(line2({ id: "x", meta: {} }))).toMatch(/bad\.jsonl:2: prompt must be a non-empty list of \{role, content\} messages$/);
    expect(await loadError(line2({ id: "x", prompt: [{ role: "robot", content: "hi" }] }))).toMatch(/bad\.jsonl:2: prompt\[0\]\.role must be one of system, user, assistant, tool \(got "robot"\)$/);
    expect(await loadError(line2({ id: "x", prompt: [{ role: "user", content: 3 }] }))).toMatch(/bad\.jsonl:2: prompt\[0\]\.content must be a string$/);
    expect(await loadError(line2({ id: "x", prompt, meta: [1] }))).toMatch(/bad\.jsonl:2: meta must be an object$/);
    expect(await loadError(line2({ id: "ok", prompt }))).toMatch(/bad\.jsonl:2: duplicate task id 'ok'$/);
    expect(await loadError(file("empty.jsonl", "\n\n"))).toMatch(/empty\.jsonl: no tasks$/);
    expect(await loadError(file("t.csv", "id\n"))).toMatch(/unsupported task file '\.csv' \(use \.jsonl or \.parquet\)$/);
    expect(await loadError(join(dir, "missing.jsonl"))).toMatch(/^env\.tasks: task file .*missing\.jsonl not found$/);
  });

  it("reads Parquet with prompt and meta as JSON text, and names the row of a bad one", async () => {
    const p = join(dir, "t.parquet");
    writeParquetFile(
      p,
      tableFromArrays({
        id: ["p0", "p1"],
        prompt: [JSON.stringify(prompt), JSON.stringify(prompt.slice(1))],
        meta: [JSON.stringify({ expression: "6*7", answer: 42 }), "{}"],
      }),
    );
    expect(await loadTaskFile(p)).toEqual([
      { id: "p0", prompt, meta: { expression: "6*7", answer: 42 } },
      { id: "p1", prompt: prompt.slice(1), meta: {} },
    ]);
    // Nested columns: prompt a list of {role, content} structs, meta a struct (INT64 answers come back as numbers).
    const nested = join(dir, "nested.parquet");
    const message = new Struct([new Field("role", new Utf8()), new Field("content", new Utf8())]);
    const metaType = new Struct([new Field("expression", new Utf8()), new Field("answer", new Int64())]);
    writeParquetFile(
      nested,
      new Table({
        id: vectorFromArray(["n0"], new Utf8()),
        prompt: vectorFromArray([prompt], new List(new Field("item", message))),
        meta: vectorFromArray([{ expression: "6*7", answer: 42n }], metaType),
      }),
    );
    expect(await loadTaskFile(nested)).toEqual([{ id: "n0", prompt, meta: { expression: "6*7", answer: 42 } }]);
    const bad = join(dir, "bad.parquet");
    writeParquetFile(bad, tableFromArrays({ id: ["p0", ""], prompt: [JSON.stringify(prompt), JSON.stringify(prompt)], meta: ["{}", "{}"] }));
    expect(await loadError(bad)).toMatch(/bad\.parquet row 1: id must be a non-empty string$/);
    expect(await loadError(file("junk.parquet", "not parquet at all"))).toMatch(/junk\.parquet: not a readable Parquet file/);
  });
});
