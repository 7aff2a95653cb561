// A small, generic coding agent written with the official `openai` client, for any
// OpenAI-compatible endpoint. It reads a task (from a file or the command line), works in a
// directory with four tools (list, read and write files, run node) through native tool calling,
// and prints its final reply.
//
//   OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... \
//     node agent.mjs --cwd ./my-package --task-file ISSUE.md --model gpt-4o-mini
//   node agent.mjs --cwd ./my-package "Fix the failing test in test/basic.test.mjs"
//
// Options: --cwd DIR (default: the current directory), --task-file FILE, --model NAME (default:
// $OPENAI_MODEL, else gpt-4o-mini), --max-turns N (default 16), --max-tokens N per reply (default 2048).
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { parseArgs } from "node:util";
import OpenAI from "openai";

const MAX_OUTPUT = 12_000;
const RUN_TIMEOUT_MS = 60_000;

function usage(why) {
  console.error(`${why}\nusage: node agent.mjs [--cwd DIR] [--model NAME] [--max-turns N] [--max-tokens N] (--task-file FILE | task text...)`);
  process.exit(2);
}

let args;
try {
  args = parseArgs({
    allowPositionals: true,
    options: {
      cwd: { type: "string" },
      "task-file": { type: "string" },
      model: { type: "string" },
      "max-turns": { type: "string" },
      "max-tokens": { type: "string" },
    },
  });
} catch (e) {
  usage(e.message);
}
const opt = args.values;
const positiveInt = (name, text, dflt) => {
  if (text === undefined) return dflt;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) usage(`--${name} must be an integer >= 1, got ${text}`);
  return n;
};
const root = resolve(opt.cwd ?? ".");
const model = opt.model ?? process.env.OPENAI_MODEL ?? "gpt-4o-mini";
const maxTurns = positiveInt("max-turns", opt["max-turns"], 16);
const maxTokens = positiveInt("max-tokens", opt["max-tokens"], 2048);
const task = (opt["task-file"] !== undefined ? readFileSync(opt["task-file"], "utf8") : args.positionals.join(" ")).trim();
if (task === "") usage("no task given");

const cap = (text) => (text.length <= MAX_OUTPUT ? text : `${text.slice(0, MAX_OUTPUT)}\n[... ${text.length - MAX_OUTPUT} more characters]`);

/** A path inside the working directory; refuses anything that would leave it. */
function inside(path) {
  if (typeof path !== "string" || path === "") throw new Error("path must be a non-empty string");
  const full = resolve(root, path);
  if (full !== root && !full.startsWith(root + sep)) throw new Error(`${path} is outside the working directory`);
  return full;
}

function listFiles({ path = "." }) {
  const out = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (entry.name === "node_modules" || entry.name === ".git") continue;
      const full = join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else out.push(relative(root, full).split(sep).join("/"));
    }
  };
  walk(inside(path));
  return out.join("\n") || "(no files)";
}

function readFile({ path }) {
  return cap(readFileSync(inside(path), "utf8"));
}

function writeFile({ path, content }) {
  if (typeof content !== "string") throw new Error("content must be a string");
  const full = inside(path);
  mkdirSync(dirname(full), { recursive: true });
  writeFileSync(full, content);
  return `wrote ${path} (${Buffer.byteLength(content)} bytes)`;
}

function runNode({ args: argv }) {
  if (!Array.isArray(argv) || !argv.every((a) => typeof a === "string")) throw new Error("args must be an array of strings");
  const r = spawnSync(process.execPath, argv, { cwd: root, encoding: "utf8", timeout: RUN_TIMEOUT_MS, maxBuffer: 8 * 1024 * 1024 });
  if (r.error && r.status === null && r.signal === null) throw r.error;
  const status = r.signal ? `killed by ${r.signal}` : `exit code ${r.status}`;
  return [status, r.stdout && `--- stdout ---\n${cap(r.stdout)}`, r.stderr && `--- stderr ---\n${cap(r.stderr)}`].filter(Boolean).join("\n");
}

const handlers = { list_files: listFiles, read_file: readFile, write_file: writeFile, run_node: runNode };

const fn = (name, description, properties, required) => ({
  type: "function",
  function: { name, description, parameters: { type: "object", properties, required, additionalProperties: false } },
});
const tools = [
  fn("list_files", "List the files under a directory (default: the working directory), node_modules and .git left out.", { path: { type: "string" } }, []),
  fn("read_file", "Show a text file.", { path: { type: "string", description: "relative to the working directory" } }, ["path"]),
  fn("write_file", "Create or overwrite a file with the full new content.", { path: { type: "string" }, content: { type: "string" } }, ["path", "content"]),
  fn(
    "run_node",
    "Run node with these arguments in the working directory, e.g. [\"--test\", \"test/\"]; shows the exit code and output.",
    { args: { type: "array", items: { type: "string" } } },
    ["args"],
  ),
];

/** Run one requested tool call; a bad call or a failing tool becomes the text the model sees. */
function runTool(call) {
  const handler = handlers[call.function.name];
  if (!handler) return `error: unknown tool ${call.function.name}`;
  try {
    return handler(JSON.parse(call.function.arguments || "{}"));
  } catch (e) {
    return `error: ${e.message}`;
  }
}

const client = new OpenAI({ maxRetries: 0 });
const messages = [
  {
    role: "system",
    content:
      "You are a careful software engineer. Solve the task in the working directory using the tools: look at the files, " +
      "change what is needed, run the tests with run_node. Do not change existing tests. When done, reply with a short " +
      "summary and no tool call.",
  },
  { role: "user", content: task },
];

for (let turn = 0; turn < maxTurns; turn++) {
  const res = await client.chat.completions.create({ model, messages, tools, max_tokens: maxTokens, temperature: 0 });
  const message = res.choices[0]?.message;
  if (!message) throw new Error("the model returned no choice");
  messages.push(message);
  if (!message.tool_calls || message.tool_calls.length === 0) {
    console.log(message.content ?? "");
    process.exit(0);
  }
  for (const call of message.tool_calls) {
    messages.push({ role: "tool", tool_call_id: call.id, content: runTool(call) });
  }
}
console.error(`no final answer after ${maxTurns} turns`);
process.exit(1);
