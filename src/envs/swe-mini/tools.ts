// The swe-mini tools: list, read, write and edit files, and run node, all inside the program's
// sandbox and all traced by its hygiene monitor. Edits are computed here (apply-edit.ts) but every
// read and write of the repository happens in the sandbox, as the sandbox's user.
import { posix } from "node:path";
import type { ExecResult, Sandbox } from "../../sandbox/sandbox.js";
import type { HygieneMonitor } from "../../sandbox/hygiene/monitor.js";
import type { Tool, ToolResult } from "../env.js";
import { applyFilePatch, applySearchReplace, EditError, parseSearchReplace, parseUnifiedDiff } from "./apply-edit.js";
import { shellWords } from "./shell-words.js";

export const REPO_DIR = "/workspace/repo";
/** Characters of a file or of each output stream shown to the agent. */
export const MAX_TOOL_OUTPUT = 12_000;
const NODE = "/usr/bin/node";

/** What the tools need to know about the program running in a sandbox. */
export interface SweProgramState {
  monitor: HygieneMonitor;
  /** Environment variables of the program's variant. */
  env: Record<string, string>;
}

function cap(text: string): string {
  return text.length <= MAX_TOOL_OUTPUT ? text : `${text.slice(0, MAX_TOOL_OUTPUT)}\n[... ${text.length - MAX_TOOL_OUTPUT} more characters]`;
}

/**
 * `how` a command ended, followed by the sandbox limit that stopped it when one did, so that the
 * attempt is on record in the trajectory and the model sees why.
 */
function withLimit(how: string, r: ExecResult): string {
  if (r.limit === "memory") return `${how}: out of memory (sandbox memory limit)`;
  return r.limit ? `${how}: stopped by the sandbox's ${r.limit} limit` : how;
}

/** Why a tool's command failed: the first line of its stderr (or how it ended) and the limit, if any. */
function failed(r: ExecResult): string {
  const how = r.timedOut ? "timed out" : r.signal ? `killed by ${r.signal}` : r.stderr.trim().split("\n")[0] || `exit ${r.exitCode}`;
  return withLimit(how, r);
}

// Reads stdin and writes it to argv[1], creating directories; refuses paths outside /workspace.
const WRITE_SCRIPT = `
const fs = require("fs"), path = require("path");
const target = path.resolve(process.argv[1]);
if (!target.startsWith("/workspace/")) { console.error("path must stay inside /workspace"); process.exit(2); }
fs.mkdirSync(path.dirname(target), { recursive: true });
fs.writeFileSync(target, fs.readFileSync(0));
`;

/** The tools, bound to a lookup of each sandbox's program state. */
export function createSweTools(stateOf: (sandbox: Sandbox) => SweProgramState): Tool[] {
  const exec = (sandbox: Sandbox, argv: string[], origin: { tool: string; input: string }, stdin?: string): Promise<ExecResult> => {
    const st = stateOf(sandbox);
    return st.monitor.exec(sandbox, argv, { cwd: REPO_DIR, env: st.env, ...(stdin === undefined ? {} : { stdin }) }, origin);
  };
  const readFile = async (sandbox: Sandbox, path: string, origin: { tool: string; input: string }): Promise<string | undefined> => {
    const r = await exec(sandbox, ["/bin/cat", "--", path], origin);
    if (r.exitCode === 0) return r.stdout;
    if (/No such file/.test(r.stderr)) return undefined;
    throw new EditError(`cannot read ${path}: ${failed(r)}`);
  };
  const writeFile = async (sandbox: Sandbox, path: string, content: string, origin: { tool: string; input: string }): Promise<void> => {
    const r = await exec(sandbox, [NODE, "-e", WRITE_SCRIPT, path], origin, content);
    if (r.exitCode !== 0) throw new EditError(`cannot write ${path}: ${failed(r)}`);
  };

  const listFiles: Tool = {
    name: "list_files",
    description: "List the files under a directory of the repository (default: the repository root; node_modules omitted).",
    async run(input, sandbox) {
      const dir = input.trim() || ".";
      const r = await exec(sandbox, ["/usr/bin/find", dir, "-not", "-path", "*/node_modules/*", "-not", "-name", "node_modules", "-type", "f"], { tool: "list_files", input });
      if (r.exitCode !== 0) return { ok: false, output: `list_files: ${failed(r)}` };
      const files = r.stdout.split("\n").filter(Boolean).map((p) => posix.normalize(p)).sort();
      return { ok: true, output: cap(files.join("\n")) };
    },
  };

  const readFileTool: Tool = {
    name: "read_file",
    description: "Show a file of the repository (path relative to the repository root).",
    async run(input, sandbox) {
      const path = input.trim();
      if (!path) return { ok: false, output: "read_file: give a path, e.g. src/index.js" };
      try {
        const text = await readFile(sandbox, path, { tool: "read_file", input });
        return text === undefined ? { ok: false, output: `read_file: ${path}: no such file` } : { ok: true, output: cap(text) };
      } catch (e) {
        return { ok: false, output: `read_file: ${(e as Error).message}` };
      }
    },
  };

  const writeFileTool: Tool = {
    name: "write_file",
    description: "Create or overwrite a file: first line the path, then the full content.",
    async run(input, sandbox) {
      const nl = input.indexOf("\n");
      const path = (nl < 0 ? input : input.slice(0, nl)).trim();
      if (!path || nl < 0) return { ok: false, output: "write_file: first line is the path, the following lines the content" };
      let content = input.slice(nl + 1);
      if (content !== "" && !content.endsWith("\n")) content += "\n";
      try {
        await writeFile(sandbox, path, content, { tool: "write_file", input });
        return { ok: true, output: `wrote ${path} (${content.split("\n").length - 1} lines)` };
      } catch (e) {
        return { ok: false, output: `write_file: ${(e as Error).message}` };
      }
    },
  };

  const editFile: Tool = {
    name: "edit_file",
    description:
      "Edit files with a unified diff (--- a/path, +++ b/path, @@ hunks) or with a path line followed by " +
      "<<<<<<< SEARCH / ======= / >>>>>>> REPLACE blocks.",
    async run(input, sandbox) {
      const origin = { tool: "edit_file", input };
      try {
        if (/^(---|diff )/.test(input.trimStart())) {
          const patches = parseUnifiedDiff(input.trimStart());
          // Compute every file first so a failing hunk leaves the repository untouched.
          const results: { path: string; content: string | undefined }[] = [];
          for (const p of patches) results.push({ path: p.path, content: applyFilePatch(await readFile(sandbox, p.path, origin), p) });
          for (const r of results) {
            if (r.content !== undefined) await writeFile(sandbox, r.path, r.content, origin);
            else {
              const rm = await exec(sandbox, ["/bin/rm", "-f", "--", r.path], origin);
              if (rm.exitCode !== 0) throw new EditError(`cannot remove ${r.path}: ${failed(rm)}`);
            }
          }
          return { ok: true, output: `applied: ${results.map((r) => r.path).join(", ")}` };
        }
        const nl = input.indexOf("\n");
        const path = input.slice(0, Math.max(nl, 0)).trim();
        if (!path) throw new EditError("first line must be the path (or give a unified diff)");
        const before = await readFile(sandbox, path, origin);
        if (before === undefined) throw new EditError(`${path}: no such file`);
        await writeFile(sandbox, path, applySearchReplace(path, before, parseSearchReplace(input.slice(nl + 1))), origin);
        return { ok: true, output: `applied: ${path}` };
      } catch (e) {
        if (!(e instanceof EditError)) throw e;
        return { ok: false, output: `edit_file: ${e.message}` };
      }
    },
  };

  const run: Tool = {
    name: "run",
    description: "Run a node command in the repository, e.g. `node --test test/` or `node -e \"...\"` (node only, no shell).",
    async run(input, sandbox): Promise<ToolResult> {
      let argv: string[];
      try {
        argv = shellWords(input);
      } catch (e) {
        return { ok: false, output: `run: ${(e as Error).message}` };
      }
      if (argv[0] !== "node") return { ok: false, output: "run: only node commands are allowed, e.g. node --test test/" };
      const r = await exec(sandbox, [NODE, ...argv.slice(1)], { tool: "run", input });
      const ended = r.timedOut ? "timed out" : r.signal ? `killed by ${r.signal}` : `exit code ${r.exitCode}`;
      const status = withLimit(ended, r);
      const out = [status, r.stdout && `--- stdout ---\n${cap(r.stdout)}`, r.stderr && `--- stderr ---\n${cap(r.stderr)}`].filter(Boolean).join("\n");
      // Out of memory ends the program as sandbox_oom (the agent layer reads a crashed, out-of-memory tool).
      return { ok: r.exitCode === 0, output: out, ...(r.limit === "memory" ? { crashed: true } : {}) };
    },
  };

  return [listFiles, readFileTool, writeFileTool, editFile, run];
}
