// Tasks from a file (`env.tasks: ./tasks.jsonl` or `./tasks.parquet`): one task per line or row in the
// environment's task format — `id`, `prompt` (a list of {role, content} messages), `meta` (an object) — as
// `arbor validate` writes its filtered dataset (whose lines may also carry `env` and `golden`: `env` must
// name the run's environment, `golden` is ignored). Parquet is read with hyparquet (pure JavaScript); its
// `prompt` and `meta` columns may be nested (list of structs, struct) or JSON text. Errors name the line/row.
import { readFileSync, statSync } from "node:fs";
import { extname } from "node:path";
import { ArborError } from "../core/errors.js";
import type { ChatMessage } from "../core/types.js";
import type { Task } from "./env.js";

/** Bounds: a task file is read whole, so it stays a dataset, not a corpus. */
export const MAX_TASK_FILE_BYTES = 256 * 1024 * 1024;
export const MAX_TASKS = 1_000_000;

const ROLES = new Set(["system", "user", "assistant", "tool"]);

/**
 * Read the tasks of a `.jsonl` or `.parquet` file, in file order. `envName`: the run's environment; a line
 * whose `env` names another is refused. Throws an {@link ArborError} naming the file, the line (or row) and
 * the field for a bad task, a duplicate id, an empty file or an unsupported extension.
 */
export async function loadTaskFile(path: string, envName?: string): Promise<Task[]> {
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    throw new ArborError(`env.tasks: task file ${path} not found`, "config");
  }
  if (size > MAX_TASK_FILE_BYTES) throw new ArborError(`env.tasks: ${path} is ${size} bytes (limit ${MAX_TASK_FILE_BYTES})`, "config");
  const ext = extname(path).toLowerCase();
  let rows: { where: string; value: unknown }[];
  if (ext === ".jsonl") rows = jsonlRows(path);
  else if (ext === ".parquet") rows = await parquetRows(path);
  else throw new ArborError(`env.tasks: ${path}: unsupported task file '${ext || "(no extension)"}' (use .jsonl or .parquet)`, "config");
  if (rows.length === 0) throw new ArborError(`env.tasks: ${path}: no tasks`, "config");
  if (rows.length > MAX_TASKS) throw new ArborError(`env.tasks: ${path}: ${rows.length} tasks (limit ${MAX_TASKS})`, "config");
  const seen = new Set<string>();
  return rows.map(({ where, value }) => {
    const task = parseTask(value, where, envName);
    if (seen.has(task.id)) throw new ArborError(`env.tasks: ${where}: duplicate task id '${task.id}'`, "config");
    seen.add(task.id);
    return task;
  });
}

function jsonlRows(path: string): { where: string; value: unknown }[] {
  const rows: { where: string; value: unknown }[] = [];
  readFileSync(path, "utf8")
    .split("\n")
    .forEach((text, i) => {
      if (text.trim() === "") return;
      const where = `${path}:${i + 1}`;
      try {
        rows.push({ where, value: JSON.parse(text) });
      } catch (e) {
        throw new ArborError(`env.tasks: ${where}: not JSON (${e instanceof Error ? e.message : String(e)})`, "config");
      }
    });
  return rows;
}

async function parquetRows(path: string): Promise<{ where: string; value: unknown }[]> {
  // Imported on first use: runs without a Parquet task file never load the reader.
  const { asyncBufferFromFile, parquetReadObjects } = await import("hyparquet");
  let objects: Record<string, unknown>[];
  try {
    objects = await parquetReadObjects({ file: await asyncBufferFromFile(path) });
  } catch (e) {
    throw new ArborError(`env.tasks: ${path}: not a readable Parquet file (${e instanceof Error ? e.message : String(e)})`, "config");
  }
  return objects.map((o, i) => ({ where: `${path} row ${i}`, value: fromParquet(o) }));
}

/** Parquet values as JSON would give them: INT64's bigints as numbers (exact ones), JSON-text columns parsed. */
function fromParquet(v: unknown): unknown {
  if (typeof v === "bigint") return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
  if (Array.isArray(v)) return v.map(fromParquet);
  if (v instanceof Date) return v.toISOString();
  if (typeof v === "object" && v !== null && !(v instanceof Uint8Array)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fromParquet(x)]));
  return v;
}

/** A JSON-text column (`prompt`, `meta` written as strings): parsed; anything else as is. */
function jsonText(v: unknown, where: string, field: string): unknown {
  if (typeof v !== "string") return v;
  try {
    return JSON.parse(v);
  } catch {
    throw new ArborError(`env.tasks: ${where}: ${field} is a string but not JSON`, "config");
  }
}

function parseTask(value: unknown, where: string, envName: string | undefined): Task {
  const bad = (why: string): never => {
    throw new ArborError(`env.tasks: ${where}: ${why}`, "config");
  };
  if (typeof value !== "object" || value === null || Array.isArray(value)) bad("a task must be an object {id, prompt, meta}");
  const v = value as Record<string, unknown>;
  if (v.env !== undefined && v.env !== null && envName !== undefined && v.env !== envName) bad(`env '${String(v.env)}' is not the run's environment '${envName}'`);
  if (typeof v.id !== "string" || v.id === "") bad("id must be a non-empty string");
  const prompt = jsonText(v.prompt, where, "prompt");
  if (!Array.isArray(prompt) || prompt.length === 0) bad("prompt must be a non-empty list of {role, content} messages");
  (prompt as unknown[]).forEach((m, i) => {
    const msg = (m ?? {}) as Record<string, unknown>;
    if (typeof msg.role !== "string" || !ROLES.has(msg.role)) bad(`prompt[${i}].role must be one of ${[...ROLES].join(", ")} (got ${JSON.stringify(msg.role)})`);
    if (typeof msg.content !== "string") bad(`prompt[${i}].content must be a string`);
  });
  const meta = jsonText(v.meta ?? {}, where, "meta");
  if (typeof meta !== "object" || meta === null || Array.isArray(meta)) bad("meta must be an object");
  // Only role and content (and a tool message's name): other columns a Parquet writer adds are not messages'.
  const messages = (prompt as Record<string, unknown>[]).map((m) => ({ role: m.role, content: m.content, ...(typeof m.name === "string" ? { name: m.name } : {}) }) as ChatMessage);
  return { id: v.id as string, prompt: messages, meta: meta as Record<string, unknown> };
}
