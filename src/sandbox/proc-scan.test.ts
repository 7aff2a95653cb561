// Killing a finished sandbox's leftovers must never reach another sandbox whose pid namespace got the same
// inode number (the kernel reuses them once a namespace is gone): only a namespace whose pid 1 is still the
// one that sandbox started is scanned.
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createBwrapProvider } from "./bwrap.js";
import { killPidNamespace, killSandboxLeftovers, pidNamespaceOf, processesInPidNamespace } from "./proc-scan.js";

const root = mkdtempSync(join(tmpdir(), "arbor-proc-scan-"));
chmodSync(root, 0o755); // reachable by the sandbox's uid when running as root
const provider = createBwrapProvider({ root, limits: { cpuSeconds: 5, memoryMb: 256, wallMs: 20_000 } });

afterAll(async () => {
  await provider.destroyAll();
  rmSync(root, { recursive: true, force: true });
});

/** Host pid of the process whose argv is exactly `argv`, polled until it appears. */
async function findProcess(argv: string[]): Promise<number> {
  const want = `${argv.join("\0")}\0`;
  for (let i = 0; i < 200; i++) {
    for (const e of readdirSync("/proc")) {
      if (!/^\d+$/.test(e)) continue;
      try {
        if (readFileSync(`/proc/${e}/cmdline`, "utf8") === want) return Number(e);
      } catch {
        // exited meanwhile
      }
    }
    await new Promise((r) => globalThis.setTimeout(r, 25));
  }
  throw new Error(`no process ${argv.join(" ")}`);
}

describe("killSandboxLeftovers", () => {
  it("leaves alone a live sandbox whose namespace has the number of a finished one, and kills its own", async () => {
    const sb = await provider.create("reuse");
    const argv = ["/bin/sleep", "7.25"];
    const running = sb.exec(argv);
    const pid = await findProcess(argv);
    const ns = pidNamespaceOf(pid) as number;
    expect(ns).toBeGreaterThan(0);
    // A finished sandbox whose namespace had this number: its pid 1 is gone (no such pid runs in `ns`).
    const gone = { initPid: 2 ** 22 + 1, pidNs: ns };
    expect(killSandboxLeftovers(gone)).toBe(0);
    expect(processesInPidNamespace(ns)).toContain(pid);
    // The sandbox's own pid 1 (the oldest process in the namespace) still finds and kills them.
    const init = Math.min(...processesInPidNamespace(ns));
    expect(killSandboxLeftovers({ initPid: init, pidNs: ns })).toBeGreaterThan(0);
    const r = await running;
    expect(r.signal ?? r.exitCode).not.toBe(0);
    expect(killPidNamespace(ns)).toBe(0);
    await sb.destroy();
  });
});
