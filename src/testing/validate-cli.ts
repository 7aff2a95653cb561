// Test helper: run the `arbor` CLI as a separate process without blocking this one (the tests
// serve gateways the CLI calls back into).
import { execFile } from "node:child_process";
import { join, resolve } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
export const repoRoot = resolve(import.meta.dirname, "../..");

/** Run the CLI; resolves with its exit code and output whatever the code. */
export async function arbor(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, [join(repoRoot, "bin/arbor.mjs"), ...args], { cwd: repoRoot, env: { ...process.env, ...env }, timeout: 120_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code?: unknown; stdout?: string; stderr?: string };
    return { code: typeof x.code === "number" ? x.code : -1, stdout: x.stdout ?? "", stderr: x.stderr ?? "" };
  }
}
