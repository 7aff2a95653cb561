// Runs a command inside a sandbox under `strace -f` (on top of Sandbox.exec, no provider support
// needed) and returns the command's own result plus every file path it touched. The trace comes
// back on stderr after a per-exec random marker; the command's own stderr is capped before it.
import { randomBytes } from "node:crypto";
import { posix } from "node:path";
import { ArborError } from "../../core/errors.js";
import type { ExecOptions, ExecResult, Sandbox } from "../sandbox.js";
import { parseStrace, type FileAccess } from "./strace-parse.js";

export const STRACE = "/usr/bin/strace";
/** Where the wrapper keeps the trace while the command runs: the command touching it is tampering. */
export const TRACE_DIR_GLOB = "/tmp/.arbor-trace.*/**";
/** Bytes of the command's own stderr kept (the rest of stderr is the trace). */
export const TRACED_STDERR_BYTES = 256 * 1024;

// $1 = marker, $2 = cap, rest = the command. stdin and stdout pass straight through.
const WRAPPER = [
  'm=$1; cap=$2; shift 2',
  `[ -x ${STRACE} ] || { echo "arbor-trace: ${STRACE} is not installed in the sandbox" >&2; exit 125; }`,
  'd=$(mktemp -d /tmp/.arbor-trace.XXXXXX) || exit 125',
  // --seccomp-bpf: only the traced syscalls stop the tracee, so node starts nearly as fast as untraced.
  `${STRACE} -f -qq -y -s 4096 --seccomp-bpf -e trace=%file -o "$d/t" -- "$@" 2>"$d/e"`,
  "rc=$?",
  'head -c "$cap" "$d/e" >&2',
  "printf '\\n%s\\n' \"$m\" >&2",
  'cat "$d/t" >&2',
  'rm -rf "$d"',
  'exit "$rc"',
].join("\n");

export interface TracedResult {
  result: ExecResult;
  accesses: FileAccess[];
  /**
   * False when the trace did not come back whole (the command was killed by the wall-clock limit,
   * or the trace passed the sandbox's output cap): what it touched is then not fully known.
   */
  traceComplete: boolean;
}

/** Run `argv` in `sandbox` under strace; `result.stderr` is the command's own stderr only. */
export async function tracedExec(sandbox: Sandbox, argv: string[], opts: ExecOptions = {}): Promise<TracedResult> {
  const marker = `--arbor-trace-${randomBytes(12).toString("hex")}--`;
  const r = await sandbox.exec(["/bin/sh", "-c", WRAPPER, "arbor-trace", marker, String(TRACED_STDERR_BYTES), ...argv], opts);
  if (r.exitCode === 125 && r.stderr.startsWith("arbor-trace:")) throw new ArborError(`hygiene: ${r.stderr.trim().slice(13)}`, "sandbox");
  const at = r.stderr.lastIndexOf(`\n${marker}\n`);
  if (at < 0) return { result: r, accesses: [], traceComplete: false };
  const trace = r.stderr.slice(at + marker.length + 2);
  // A traced command's own execve is always in the trace: an empty one means strace never ran it
  // (ptrace refused, or no such command), and unwatched runs must not pass as clean ones.
  if (trace.trim() === "") {
    const why = r.stderr.slice(0, at).trim().split("\n")[0] ?? "";
    throw new ArborError(`hygiene: strace produced no trace for ${argv[0]} (${why || `exit ${r.exitCode}`})`, "sandbox");
  }
  const cwd = posix.resolve("/workspace", opts.cwd ?? ".");
  const accesses = parseStrace(trace, cwd);
  // Truncating the trace file erases the line that did it (strace writes a call's start before it
  // runs), but not its end nor the NULs up to strace's offset: any trace of it is tampering.
  const touched = /\/tmp\/\.arbor-trace\.[A-Za-z0-9]+(?:\/[^\s>"]*)?/.exec(trace)?.[0];
  if (touched !== undefined || trace.includes("\0")) {
    const path = touched === undefined ? "/tmp/.arbor-trace.?/t" : touched.split("/").length > 3 ? touched : `${touched}/t`;
    accesses.push({ pid: 0, syscall: "trace-tamper", path, mode: "write" });
  }
  // The sandbox caps stderr: a cut trace may have lost accesses.
  const cut = /\n\[arbor: output truncated, \d+ more bytes dropped\]$/.test(r.stderr);
  return { result: { ...r, stderr: r.stderr.slice(0, at) }, accesses, traceComplete: !cut };
}
