// Size limits on what a sandboxed command is given to start with (argv and environment). The kernel
// refuses an execve whose strings pass ARG_MAX (a quarter of the stack limit, 2 MiB by default) or
// one string over MAX_ARG_STRLEN (128 KiB), and bubblewrap refuses more than 9000 arguments in all
// (each environment variable takes three); past them Node's spawn throws `E2BIG` or bwrap exits
// with a usage error. Checking first turns that into a failed exec that names the limit. Every
// provider applies the same limits, so a command that fits one fits all.
import type { ExecResult } from "./sandbox.js";

/** Largest single argument or `NAME=value` string, bytes (the kernel's MAX_ARG_STRLEN less its NUL). */
export const MAX_EXEC_STRING_BYTES = 128 * 1024 - 1;
/**
 * Largest argv plus environment, bytes: each string with its NUL and its 8-byte pointer, as the
 * kernel counts them. Half the default ARG_MAX, leaving room for the sandbox's own wrappers.
 */
export const MAX_EXEC_TOTAL_BYTES = 1024 * 1024;
/** Most argv entries plus environment variables (bubblewrap's own cap is 9000 arguments). */
export const MAX_EXEC_ENTRIES = 2048;

/**
 * Why `argv` with `env` is too big to start in a sandbox (a message naming the limit and the
 * size), or undefined when it fits.
 */
export function execSizeProblem(argv: readonly string[], env: Readonly<Record<string, string>> = {}): string | undefined {
  const vars = Object.entries(env);
  const entries = argv.length + vars.length;
  if (entries > MAX_EXEC_ENTRIES) {
    return `exec: argv and environment have ${entries} entries, over the sandbox's limit of ${MAX_EXEC_ENTRIES} (argument count)`;
  }
  let total = 0;
  const strings: [string, string][] = [
    ...argv.map((a, i): [string, string] => [`argv[${i}]`, a]),
    ...vars.map(([k, v]): [string, string] => [`env ${k}`, `${k}=${v}`]),
  ];
  for (const [what, s] of strings) {
    const bytes = Buffer.byteLength(s, "utf8");
    if (bytes > MAX_EXEC_STRING_BYTES) {
      return `exec: ${what} is ${bytes} bytes, over the sandbox's limit of ${MAX_EXEC_STRING_BYTES} bytes for one argument or variable (MAX_ARG_STRLEN)`;
    }
    total += bytes + 1 + 8;
  }
  if (total > MAX_EXEC_TOTAL_BYTES) {
    return `exec: argv and environment take ${total} bytes, over the sandbox's limit of ${MAX_EXEC_TOTAL_BYTES} bytes (ARG_MAX)`;
  }
  return undefined;
}

/** The failed result of a command that did not start because of the "arguments" limit. */
export function argumentsLimitResult(message: string): ExecResult {
  return { exitCode: 126, signal: null, stdout: "", stderr: `arbor: ${message}\n`, timedOut: false, durationMs: 0, limit: "arguments" };
}
