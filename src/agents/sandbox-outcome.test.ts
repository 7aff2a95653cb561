import { describe, expect, it } from "vitest";
import type { ExecResult } from "../sandbox/sandbox.js";
import { classifyExec, execToolResult } from "./sandbox-outcome.js";

const exec = (r: Partial<ExecResult>): ExecResult => ({ exitCode: 0, signal: null, stdout: "", stderr: "", timedOut: false, durationMs: 5, ...r });

describe("classifyExec", () => {
  it("trusts the provider's memory verdict, then reads allocation failures from stderr", () => {
    expect(classifyExec(exec({ exitCode: null, signal: "SIGKILL", limit: "memory" }))).toBe("oom");
    expect(classifyExec(exec({ exitCode: null, signal: "SIGTRAP", stderr: "# Fatal process OOM in Failed to reserve virtual memory" }))).toBe("oom");
    expect(classifyExec(exec({ exitCode: 1, stderr: "MemoryError" }))).toBe("oom");
    // An exit 0 that merely mentions memory is fine.
    expect(classifyExec(exec({ stdout: "ok", stderr: "warning: out of memory soon" }))).toBe("ok");
  });

  it("tells time-outs, crashes and failures apart", () => {
    expect(classifyExec(exec({ exitCode: null, signal: "SIGKILL", timedOut: true }))).toBe("timeout");
    expect(classifyExec(exec({ exitCode: null, signal: "SIGSEGV" }))).toBe("crashed");
    expect(classifyExec(exec({ exitCode: 2, stderr: "nope" }))).toBe("failed");
    expect(execToolResult("bc", exec({ exitCode: 2, stderr: "a\nb\nc\nd" }))).toEqual({ ok: false, output: "bc exited with code 2: b\nc\nd" });
    expect(execToolResult("bc", exec({ exitCode: null, signal: "SIGSEGV" }))).toEqual({ ok: false, crashed: true, output: "bc was killed by SIGSEGV" });
    expect(execToolResult("bc", exec({ exitCode: 1, stderr: "MemoryError" }))).toEqual({ ok: false, oom: true, output: "bc ran out of memory: MemoryError" });
    expect(execToolResult("bc", exec({ stdout: "87\n" }))).toEqual({ ok: true, output: "87\n" });
  });

  it("names the sandbox limit that stopped a command, so the attempt is on record", () => {
    expect(execToolResult("sh", exec({ exitCode: 1, limit: "processes" })).output).toBe("sh exited with code 1 (stopped by the sandbox's processes limit)");
    expect(execToolResult("sh", exec({ exitCode: 1, limit: "disk", stderr: "No space left on device" })).output).toBe(
      "sh exited with code 1 (stopped by the sandbox's disk limit): No space left on device",
    );
    expect(execToolResult("sh", exec({ exitCode: null, signal: "SIGXCPU", limit: "cpu" }))).toEqual({
      ok: false,
      crashed: true,
      output: "sh was killed by SIGXCPU (stopped by the sandbox's cpu limit)",
    });
  });
});
