// The shared contract suite every SandboxProvider must pass (bwrap, docker, k8s): isolation,
// limits (recorded as ExecResult.limit), wall-clock kill and complete teardown, through the
// Sandbox interface only. A provider whose backend is unreachable here is skipped, with the reason.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { connect } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import type { Sandbox } from "./sandbox.js";
import { realClock } from "../core/real-clock.js";
import type { SandboxLimits, SandboxProvider } from "./sandbox.js";

export const CONTRACT_LIMITS: SandboxLimits = { cpuSeconds: 5, memoryMb: 256, wallMs: 10_000 };

/** Host pids whose command line contains `needle` (sandbox processes are visible in host /proc). */
export function pidsWithCmdline(needle: string): number[] {
  const out: number[] = [];
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${e}/cmdline`, "utf8").replace(/\0/g, " ").includes(needle)) out.push(Number(e));
    } catch {
      // exited while scanning
    }
  }
  return out;
}

/**
 * A probe for the host pids whose /workspace is this workspace: the sandbox's processes, bwrap's pid
 * 1 included (their mount namespace has the workspace there; the host's does not). It takes the
 * workspace's identity (device, inode) now, so make it while the workspace exists. The sandbox's
 * command lines no longer name the host workspace (they are readable from inside), hence this.
 */
export function workspaceProcesses(hostWorkspace: string): () => number[] {
  const ws = statSync(hostWorkspace);
  return () => {
    const out: number[] = [];
    for (const e of readdirSync("/proc")) {
      if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
      try {
        const st = statSync(`/proc/${e}/root/workspace`);
        if (st.dev === ws.dev && st.ino === ws.ino) out.push(Number(e));
      } catch {
        // exited while scanning, a zombie, or no /workspace in its mount namespace
      }
    }
    return out;
  };
}

/** Host pids running exactly `sh -c "sleep 300; : <marker>"`. */
export function markerShells(marker: string): number[] {
  return pidsWithCmdline(marker).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8") === `sh\0-c\0sleep 300; : ${marker}\0`;
    } catch {
      return false;
    }
  });
}

/** Poll `cond` on the wall clock until it holds; throws after `ms`. */
export async function waitFor(cond: () => boolean, ms = 5000): Promise<void> {
  const start = realClock.now();
  while (!cond()) {
    if (realClock.now() - start > ms) throw new Error("condition not met in time");
    await realClock.sleep(20);
  }
}

/** `p`, or a rejection if it takes longer than `ms` (a teardown must not wait for a time limit). */
async function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: { cancel(): void } | undefined;
  const limit = new Promise<never>((_, rej) => {
    timer = realClock.setTimer(ms, () => rej(new Error(`did not finish within ${ms} ms`)));
  });
  try {
    return await Promise.race([p, limit]);
  } finally {
    timer?.cancel();
  }
}

function hostCanReach(port: number): Promise<boolean> {
  return new Promise((res) => {
    const s = connect({ host: "127.0.0.1", port }, () => {
      s.destroy();
      res(true);
    });
    s.on("error", () => res(false));
  });
}

export interface ContractOptions {
  /** Why this provider cannot run here (no daemon, no cluster); the suite is then skipped with it. */
  skipReason?: string;
  /**
   * Whether `hostWorkspace` is a directory on this host and the sandbox's processes appear in this
   * host's /proc (bwrap, a local Docker engine); otherwise (k8s) those checks go through exec.
   */
  local?: boolean;
}

async function readWorkspace(sb: Sandbox, local: boolean, rel: string): Promise<string> {
  if (local) return readFileSync(`${sb.hostWorkspace}/${rel}`, "utf8");
  return (await sb.exec(["cat", rel])).stdout;
}

/** Poll through exec until the sandbox has written `rel` (remote providers: no host /proc to scan). */
async function waitForFile(sb: Sandbox, rel: string, ms = 10_000): Promise<void> {
  const start = realClock.now();
  while ((await sb.exec(["cat", rel])).exitCode !== 0) {
    if (realClock.now() - start > ms) throw new Error(`${rel} did not appear in time`);
    await realClock.sleep(50);
  }
}

/**
 * Register the contract tests for a provider. `make` builds a provider with the given limits;
 * the suite destroys every provider it made.
 */
export function describeSandboxContract(
  label: string,
  make: (limits: SandboxLimits) => SandboxProvider,
  opts: ContractOptions = {},
): void {
  const local = opts.local ?? true;
  if (opts.skipReason) console.warn(`sandbox contract: ${label}: skipped: ${opts.skipReason}`);
  describe.skipIf(opts.skipReason !== undefined)(`sandbox contract: ${label}${opts.skipReason ? ` (skipped: ${opts.skipReason})` : ""}`, () => {
    const made: SandboxProvider[] = [];
    const provider = (limits: Partial<SandboxLimits> = {}): SandboxProvider => {
      const p = make({ ...CONTRACT_LIMITS, ...limits });
      made.push(p);
      return p;
    };
    afterAll(async () => {
      for (const p of made) await p.destroyAll();
    });

    it("runs a command with stdin and returns its output", async () => {
      const sb = await provider().create("prog-echo");
      const cat = await sb.exec(["/bin/cat"], { stdin: "hello\nworld\n" });
      expect(cat).toMatchObject({ exitCode: 0, signal: null, stdout: "hello\nworld\n", stderr: "", timedOut: false });
      const sh = await sb.exec(["sh", "-c", 'echo "$0 $FOO"; pwd; echo err >&2; exit 3', "arg0"], { env: { FOO: "bar" } });
      expect(sh).toMatchObject({ exitCode: 3, signal: null, stdout: "arg0 bar\n/workspace\n", stderr: "err\n" });
      await sb.destroy();
    });

    it("has a writable workspace and a read-only /usr", async () => {
      const sb = await provider().create("prog-fs");
      await sb.writeFile("in/data.txt", "from host");
      const w = await sb.exec(["sh", "-c", "cat in/data.txt > out.txt && echo ok >> out.txt && cat out.txt"]);
      expect(w.stdout).toBe("from hostok\n");
      expect(await readWorkspace(sb, local, "out.txt")).toBe("from hostok\n");
      const ro = await sb.exec(["touch", "/usr/arbor-should-not-exist"]);
      expect(ro.exitCode).not.toBe(0);
      expect(ro.stderr).toMatch(/Read-only file system|Permission denied/);
      if (local) expect(existsSync("/usr/arbor-should-not-exist")).toBe(false);
      await expect(sb.writeFile("../escape.txt", "x")).rejects.toThrow(/must stay inside the workspace/);
      await sb.destroy();
    });

    it("has no network but loopback", async () => {
      const sb = await provider().create("prog-net");
      const dev = await sb.exec(["cat", "/proc/net/dev"]);
      const ifaces = dev.stdout
        .split("\n")
        .slice(2)
        .filter((l) => l.includes(":"))
        .map((l) => l.split(":")[0]?.trim());
      expect(ifaces).toEqual(["lo"]);
      // A real Redis listens on the host's 127.0.0.1:6379; the sandbox's loopback is its own.
      const hostReaches = await hostCanReach(6379);
      const inside = await sb.exec(["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/6379 && echo CONNECTED"]);
      expect(inside.stdout).not.toContain("CONNECTED");
      expect(inside.stderr).toMatch(/Connection refused|Network is unreachable/);
      if (!hostReaches) console.warn("no Redis on host 127.0.0.1:6379: only the in-sandbox refusal was checked");
      await sb.destroy();
    });

    it("hides host files outside the system directories", async () => {
      const sb = await provider().create("prog-hidden");
      const parent = local ? sb.hostWorkspace.slice(0, sb.hostWorkspace.lastIndexOf("/")) : "/arbor-host-only";
      const r = await sb.exec(["sh", "-c", `ls /root; ls /work; ls /etc/shadow; ls ${parent}`]);
      expect(r.stdout).toBe("");
      expect(r.stderr.match(/No such file or directory/g)?.length).toBe(4);
      await sb.destroy();
    });

    it("kills a busy loop at the CPU-time limit", async () => {
      const sb = await provider({ cpuSeconds: 1, wallMs: 20_000 }).create("prog-cpu");
      const r = await sb.exec(["sh", "-c", "while :; do :; done"]);
      expect(["SIGXCPU", "SIGKILL"]).toContain(r.signal);
      expect(r.timedOut).toBe(false);
      if (r.signal === "SIGXCPU") expect(r.limit).toBe("cpu");
      await sb.destroy();
    });

    it("makes a big allocation fail under the memory limit", async () => {
      const sb = await provider({ memoryMb: 64 }).create("prog-mem");
      const r = await sb.exec(["awk", 'BEGIN { s = sprintf("%200000000s", "x"); print length(s) }']);
      expect(r.exitCode).not.toBe(0);
      expect(r.stdout).toBe("");
      // Either the allocation fails (per-process limit: the program says so) or the OOM killer
      // ends it (cgroup limit: no message); both are recorded as the memory limit.
      if (r.signal === null) expect(r.stderr).toMatch(/memory/i);
      expect(r.limit).toBe("memory");
      const small = await sb.exec(["awk", 'BEGIN { s = sprintf("%1000000s", "x"); print length(s) }']);
      expect(small.stdout).toBe("1000000\n");
      expect(small.limit).toBeUndefined();
      await sb.destroy();
    });

    it("kills at the wall-clock limit and reports timedOut", async () => {
      const sb = await provider().create("prog-wall");
      const r = await sb.exec(["sleep", "30"], { wallMs: 300 });
      expect(r).toMatchObject({ timedOut: true, signal: "SIGKILL", exitCode: null, limit: "wall" });
      expect(r.durationMs).toBeGreaterThanOrEqual(290);
      expect(r.durationMs).toBeLessThan(5000);
      await sb.destroy();
    });

    it("destroy kills running processes, removes the workspace and is idempotent", async () => {
      const sb = await provider({ wallMs: 600_000 }).create("prog-destroy");
      const inside = local ? workspaceProcesses(sb.hostWorkspace) : () => [];
      const marker = `arbor-marker-${process.pid}-${label}-destroy`;
      // A background child that outlives its parent shell, and a foreground one.
      const run = sb.exec(["sh", "-c", `echo up > up.txt; (sh -c 'sleep 300; : ${marker}' &); sh -c 'sleep 300; : ${marker}'`]);
      if (local) {
        await waitFor(() => markerShells(marker).length === 2);
        // bwrap's pid 1, the shell and its two children (docker: the container's processes).
        expect(inside().length).toBeGreaterThanOrEqual(3);
      } else await waitForFile(sb, "up.txt");
      await within(5000, Promise.all([sb.destroy(), sb.destroy()]));
      await sb.destroy();
      expect(await run).toMatchObject({ signal: "SIGKILL", timedOut: false });
      if (local) {
        expect(existsSync(sb.hostWorkspace)).toBe(false);
        expect(pidsWithCmdline(marker)).toEqual([]);
        expect(inside()).toEqual([]);
      }
      await expect(sb.exec(["true"])).rejects.toThrow(/is destroyed/);
    });

    it("cleans up after a command that crashed on a signal", async () => {
      const sb = await provider().create("prog-crash");
      const inside = local ? workspaceProcesses(sb.hostWorkspace) : () => [];
      const r = await sb.exec(["sh", "-c", "echo before; kill -SEGV $$"]);
      expect(r).toMatchObject({ signal: "SIGSEGV", exitCode: null, stdout: "before\n" });
      expect(r.limit).toBeUndefined();
      await sb.destroy();
      if (local) {
        expect(existsSync(sb.hostWorkspace)).toBe(false);
        expect(inside()).toEqual([]);
      }
    });

    it("destroyAll removes every live sandbox", async () => {
      const p = provider({ wallMs: 600_000 });
      const sbs = await Promise.all(["a", "b", "c"].map((id) => p.create(`prog-all-${id}`)));
      const marker = `arbor-marker-${process.pid}-${label}-all`;
      const run = sbs[0]!.exec(["sh", "-c", `echo up > up.txt; sh -c 'sleep 300; : ${marker}'`]);
      if (local) await waitFor(() => markerShells(marker).length === 1);
      else await waitForFile(sbs[0]!, "up.txt");
      await within(5000, p.destroyAll());
      expect(await run).toMatchObject({ signal: "SIGKILL", timedOut: false });
      if (local) {
        for (const sb of sbs) expect(existsSync(sb.hostWorkspace)).toBe(false);
        expect(pidsWithCmdline(marker)).toEqual([]);
      }
      for (const sb of sbs) await expect(sb.exec(["true"])).rejects.toThrow(/is destroyed/);
      await p.destroyAll();
    });
  });
}
