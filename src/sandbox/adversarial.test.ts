// Adversarial programs against real bwrap sandboxes: each attack is stopped by a kernel mechanism,
// the stop is recorded as ExecResult.limit, and nothing of the sandbox survives destroy().
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBwrapProvider, type BwrapProvider, type BwrapProviderOptions } from "./bwrap.js";
import { cgroupSupport } from "./cgroup.js";
import { pidsWithCmdline, waitFor, workspaceProcesses } from "./sandbox.contract.js";
import type { Sandbox } from "./sandbox.js";
import { mountsUnder } from "./workspace-mount.js";

let root: string;
const providers: BwrapProvider[] = [];
const cg = cgroupSupport();
const isRoot = process.getuid?.() === 0;
if (!cg.ok) console.warn(`adversarial: no per-sandbox cgroups (${cg.message}): OOM-kill and fork-cap counters untested`);

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "arbor-adv-test-"));
  chmodSync(root, 0o755);
});

afterAll(async () => {
  for (const p of providers) await p.destroyAll();
  rmSync(root, { recursive: true, force: true });
});

function provider(extra: Partial<BwrapProviderOptions> = {}): BwrapProvider {
  const p = createBwrapProvider({
    root,
    limits: { cpuSeconds: 2, memoryMb: 256, wallMs: 10_000 },
    workspaceMb: 16,
    sandboxMemoryMb: 96,
    maxProcesses: 16,
    maxFileMb: 8,
    ...extra,
  });
  providers.push(p);
  return p;
}

function cgroupProcs(sb: Sandbox): number[] {
  const files = (sb as unknown as { cgroup?: { procsFiles: string[] } }).cgroup?.procsFiles ?? [];
  return files.flatMap((f) => (existsSync(f) ? readFileSync(f, "utf8").trim().split("\n").filter(Boolean).map(Number) : []));
}

/**
 * Nothing of the sandbox runs any more; after destroy its workspace, mount and cgroup are gone.
 * `inside` finds the sandbox's processes (made while the workspace exists).
 */
async function expectReclaimed(sb: Sandbox, inside = workspaceProcesses(sb.hostWorkspace)): Promise<void> {
  // The stopped command's processes die with it (the kernel may take a moment to finish exiting them).
  await waitFor(() => inside().length === 0 && cgroupProcs(sb).length === 0);
  const groups = (sb as unknown as { cgroup?: { procsFiles: string[] } }).cgroup?.procsFiles.map(dirname) ?? [];
  await sb.destroy();
  expect(inside()).toEqual([]);
  expect(existsSync(sb.hostWorkspace)).toBe(false);
  expect(mountsUnder(sb.hostWorkspace)).toEqual([]);
  for (const g of groups) expect(existsSync(g)).toBe(false);
}

describe("adversarial programs in bwrap sandboxes", () => {
  it("cannot connect anywhere: the connect attempt fails", async () => {
    const sb = await provider().create("adv-net");
    const r = await sb.exec(["bash", "-c", "exec 3<>/dev/tcp/1.1.1.1/53 && echo CONNECTED; exec 3<>/dev/tcp/10.0.0.1/80 && echo CONNECTED"]);
    expect(r.stdout).toBe("");
    expect(r.stderr.match(/Network is unreachable/g)?.length).toBeGreaterThanOrEqual(2);
    expect(r.limit).toBeUndefined();
    await expectReclaimed(sb);
  });

  it("stops a fork bomb at the process cap and records limit 'processes'", async () => {
    const sb = await provider().create("adv-bomb");
    const r = await sb.exec(["bash", "-c", "b() { b | b & }; b; sleep 2"], { wallMs: 1500 });
    expect(r.limit).toBe("processes");
    if (cg.ok) {
      // The group holding the process cap: the pids hierarchy's (cgroup v1) or the sandbox's one group (v2).
      const dirs = (sb as unknown as { cgroup: { procsFiles: string[] } }).cgroup.procsFiles.map(dirname);
      const pids = dirs.find((d) => existsSync(join(d, "pids.max")));
      expect(pids).toBeDefined();
      // The 16 processes allowed and bwrap's monitor, which sits in the group too.
      expect(readFileSync(join(pids as string, "pids.max"), "utf8").trim()).toBe("17");
      // pids.peak is there from Linux 6.1 on; the cap is refused past (limit 'processes' above) either way.
      if (existsSync(join(pids as string, "pids.peak"))) expect(Number(readFileSync(join(pids as string, "pids.peak"), "utf8"))).toBeLessThanOrEqual(17);
    }
    await expectReclaimed(sb);
  });

  it("stops a single huge file at the file-size limit (SIGXFSZ) and records limit 'disk'", async () => {
    const sb = await provider().create("adv-fsize");
    const r = await sb.exec(["sh", "-c", "head -c 20000000 /dev/zero > big"]);
    expect(r).toMatchObject({ signal: "SIGXFSZ", limit: "disk" });
    await expectReclaimed(sb);
  });

  it.skipIf(!isRoot)("stops many files at the workspace size (tmpfs) and records limit 'disk'", async () => {
    const p = provider();
    const sb = await p.create("adv-fill");
    expect(p.workspaceLimitNote).toBeUndefined();
    const r = await sb.exec(["sh", "-c", "for i in 1 2 3 4 5; do head -c 5000000 /dev/zero > f$i || exit 1; done"]);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toMatch(/No space left on device/);
    expect(r.limit).toBe("disk");
    // The host side sees the same full workspace; a later unrelated failure is not blamed on it.
    await expect(sb.writeFile("more.bin", new Uint8Array(1024 * 1024))).rejects.toThrow();
    const later = await sb.exec(["sh", "-c", "exit 2"]);
    expect(later.limit).toBeUndefined();
    // /tmp is a separate size-limited tmpfs (bwrap --size).
    const tmp = await sb.exec(["sh", "-c", "head -c 7000000 /dev/zero > /tmp/a && head -c 7000000 /dev/zero > /tmp/b"], {});
    expect(tmp.limit).toBeUndefined();
    await expectReclaimed(sb);
  });

  it("fills a small /tmp into ENOSPC and records limit 'disk'", async () => {
    const sb = await provider({ tmpSizeMb: 4 }).create("adv-tmp");
    const r = await sb.exec(["sh", "-c", "head -c 6000000 /dev/zero > /tmp/x"]);
    expect(r.stderr).toMatch(/No space left on device/);
    expect(r.limit).toBe("disk");
    await expectReclaimed(sb);
  });

  it.skipIf(!cg.ok)("OOM-kills a program over the sandbox memory and records limit 'memory'", async () => {
    const sb = await provider().create("adv-oom");
    // 150 MB resident, under the per-process address-space limit (256) but over the sandbox's 96.
    const r = await sb.exec(["awk", 'BEGIN { s = sprintf("%150000000s", "x"); print length(s) }']);
    expect(r).toMatchObject({ signal: "SIGKILL", timedOut: false, stdout: "", limit: "memory" });
    const ok = await sb.exec(["awk", 'BEGIN { s = sprintf("%10000000s", "x"); print length(s) }']);
    expect(ok).toMatchObject({ exitCode: 0, stdout: "10000000\n" });
    expect(ok.limit).toBeUndefined();
    await expectReclaimed(sb);
  });

  it("records a per-process allocation failure as limit 'memory'", async () => {
    const sb = await provider({ limits: { cpuSeconds: 2, memoryMb: 64, wallMs: 10_000 } }).create("adv-as");
    const r = await sb.exec(["awk", 'BEGIN { s = sprintf("%200000000s", "x"); print length(s) }']);
    expect(r.exitCode).not.toBe(0);
    expect(r.limit).toBe("memory");
    await expectReclaimed(sb);
  });

  it("kills a busy loop at the CPU limit (limit 'cpu') and a sleeper at the wall limit (limit 'wall')", async () => {
    const sb = await provider({ limits: { cpuSeconds: 1, memoryMb: 256, wallMs: 10_000 } }).create("adv-time");
    const cpu = await sb.exec(["sh", "-c", "while :; do :; done"]);
    expect(cpu).toMatchObject({ signal: "SIGXCPU", limit: "cpu" });
    const marker = `arbor-adv-${process.pid}-wall`;
    const wall = await sb.exec(["sh", "-c", `(sleep 300; : ${marker}) & sleep 300`], { wallMs: 300 });
    expect(wall).toMatchObject({ timedOut: true, limit: "wall" });
    expect(pidsWithCmdline(marker)).toEqual([]);
    await expectReclaimed(sb);
  }, 20_000);

  it("reclaims a sandbox destroyed while an attack is still running", async () => {
    const sb = await provider({ limits: { cpuSeconds: 30, memoryMb: 256, wallMs: 60_000 } }).create("adv-mid");
    const inside = workspaceProcesses(sb.hostWorkspace);
    const run = sb.exec(["bash", "-c", "b() { b | b & }; b; sleep 30"]);
    await new Promise<void>((res) => {
      const t = setInterval(() => {
        if (cgroupProcs(sb).length > 3 || !cg.ok) {
          clearInterval(t);
          res();
        }
      }, 20);
    });
    await sb.destroy();
    expect((await run).signal).toBe("SIGKILL");
    await expectReclaimed(sb, inside);
  });
});
