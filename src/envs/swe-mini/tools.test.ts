import { describe, expect, it } from "vitest";
import type { HygieneMonitor } from "../../sandbox/hygiene/monitor.js";
import type { ExecResult, Sandbox } from "../../sandbox/sandbox.js";
import { createSweTools } from "./tools.js";

const sandbox = { programId: "p" } as unknown as Sandbox;
const ok: ExecResult = { exitCode: 0, signal: null, stdout: "", stderr: "", timedOut: false, durationMs: 1 };

/** The tools over a monitor whose every exec returns `result` (what a real sandbox returns at each limit). */
function toolsReturning(result: ExecResult) {
  const monitor = { exec: async () => result } as unknown as HygieneMonitor;
  const tools = createSweTools(() => ({ monitor, env: {} }));
  return (name: string, input: string) => tools.find((t) => t.name === name)!.run(input, sandbox);
}

describe("swe-mini tools name the sandbox limit that stopped a command", () => {
  it("in read, write, list and edit failures as in run", async () => {
    const disk = toolsReturning({ ...ok, exitCode: null, signal: "SIGXFSZ", limit: "disk" });
    expect(await disk("write_file", "a.js\nx")).toEqual({ ok: false, output: "write_file: cannot write a.js: killed by SIGXFSZ: stopped by the sandbox's disk limit" });
    expect(await disk("run", "node a.js")).toEqual({ ok: false, output: "killed by SIGXFSZ: stopped by the sandbox's disk limit" });
    const args = toolsReturning({ ...ok, exitCode: 126, stderr: "arbor: exec: argv[2] is 200000 bytes, over the sandbox's limit\n", limit: "arguments" });
    expect(await args("read_file", "p.js")).toEqual({
      ok: false,
      output: "read_file: cannot read p.js: arbor: exec: argv[2] is 200000 bytes, over the sandbox's limit: stopped by the sandbox's arguments limit",
    });
    const procs = toolsReturning({ ...ok, exitCode: 2, stderr: "find: fork failed\n", limit: "processes" });
    expect(await procs("list_files", "")).toEqual({ ok: false, output: "list_files: find: fork failed: stopped by the sandbox's processes limit" });
    const oom = toolsReturning({ ...ok, exitCode: null, signal: "SIGKILL", limit: "memory" });
    expect(await oom("edit_file", "a.js\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE")).toEqual({
      ok: false,
      output: "edit_file: cannot read a.js: killed by SIGKILL: out of memory (sandbox memory limit)",
    });
    // Without a limit the reason stays as it was; an empty stderr falls back to the exit code.
    const plain = toolsReturning({ ...ok, exitCode: 3 });
    expect(await plain("list_files", "")).toEqual({ ok: false, output: "list_files: exit 3" });
  });
});
