import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBwrapArgv, DEFAULT_BINARIES } from "./bwrap-args.js";
import { BwrapProvider, bwrapAvailable, createBwrapProvider } from "./bwrap.js";
import { describeSandboxContract, markerShells, pidsWithCmdline, waitFor, workspaceProcesses } from "./sandbox.contract.js";
import { createSandboxProvider, sandboxProviderNames } from "./registry.js";
import { sandboxCgroupDirs } from "./cgroup.js";
import { mountsUnder } from "./workspace-mount.js";
import { memoryEscapeFilter } from "./seccomp.js";
import type { SandboxLimits } from "./sandbox.js";

const LIMITS: SandboxLimits = { cpuSeconds: 5, memoryMb: 256, wallMs: 10_000 };
const here = fileURLToPath(new URL(".", import.meta.url));

let root: string;
const providers: BwrapProvider[] = [];

function provider(extra: Partial<ConstructorParameters<typeof BwrapProvider>[0]> = {}): BwrapProvider {
  const p = createBwrapProvider({ root, limits: LIMITS, ...extra });
  providers.push(p);
  return p;
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "arbor-bwrap-test-"));
  chmodSync(root, 0o755); // the sandbox uid must be able to reach its workspace
});

afterAll(async () => {
  for (const p of providers) await p.destroyAll();
  rmSync(root, { recursive: true, force: true });
});

describe("bwrap availability and registry", () => {
  it("bubblewrap works on this host", () => {
    expect(bwrapAvailable()).toEqual({ ok: true, message: "bubblewrap sandboxes work" });
  });

  it("reports a missing binary clearly", () => {
    expect(() => createBwrapProvider({ root, limits: LIMITS, binaries: { bwrap: "/nonexistent/bwrap" } })).toThrow(
      /bubblewrap \(bwrap\) is not installed: apt-get install bubblewrap/,
    );
  });

  it("creates providers by name and lists known names for an unknown one", async () => {
    const p = createSandboxProvider("bwrap", { root, limits: LIMITS });
    expect(p.name).toBe("bwrap");
    await p.destroyAll();
    expect(sandboxProviderNames).toContain("bwrap");
    expect(() => createSandboxProvider("docker-ish", { root, limits: LIMITS })).toThrow(
      "unknown sandbox provider 'docker-ish' (known: bwrap, docker, k8s)",
    );
  });

  it("rejects bad limits", () => {
    expect(() => createBwrapProvider({ root, limits: { ...LIMITS, cpuSeconds: 0.5 } })).toThrow(
      "sandbox: limits.cpuSeconds must be a positive integer, got 0.5",
    );
  });

  // Only as root do sandboxes run as an unprivileged uid that must reach the root.
  it.skipIf(process.getuid?.() !== 0)("rejects a root the sandbox's uid cannot reach", () => {
    const hidden = join(root, "private");
    mkdirSync(hidden, { mode: 0o700 });
    expect(() => createBwrapProvider({ root: join(hidden, "sb"), limits: LIMITS })).toThrow(/is not searchable/);
  });

  it("resolves cwd inside the workspace and rejects bad env names", () => {
    const base = {
      binaries: DEFAULT_BINARIES,
      hostWorkspace: "/tmp/x",
      uid: null,
      cpuSeconds: 1,
      memoryMb: 1,
      maxProcesses: 1,
      maxFileMb: 1,
      tmpSizeMb: 1,
      shmSizeMb: 1,
      infoFd: 3,
    };
    const argv = buildBwrapArgv({ ...base, argv: ["true"], cwd: "sub/../dir" });
    expect(argv[argv.indexOf("--chdir") + 1]).toBe("/workspace/dir");
    expect(argv).toContain("--unshare-all");
    expect(() => buildBwrapArgv({ ...base, argv: ["true"], env: { "A=B": "1" } })).toThrow(/env name 'A=B'/);
    expect(() => buildBwrapArgv({ ...base, argv: [] })).toThrow(/argv must not be empty/);
  });
});

describeSandboxContract("bwrap", (limits) => provider({ limits }));

describe("bwrap sandbox specifics", () => {
  // Sandboxes run as uid 65534 only when Arbor runs as root (else as the user it runs as).
  it.skipIf(process.getuid?.() !== 0)("runs as an unprivileged uid with a process-count limit", async () => {
    const sb = await provider({ maxProcesses: 6 }).create("prog-nproc");
    const id = await sb.exec(["sh", "-c", "id -u; grep CapEff /proc/self/status"]);
    expect(id.stdout).toBe("65534\nCapEff:\t0000000000000000\n");
    const fork = await sb.exec(["sh", "-c", 'i=0; while [ $i -lt 20 ]; do sleep 5 & i=$((i+1)); echo $i; done']);
    const started = fork.stdout.trim().split("\n").length;
    expect(started).toBeLessThan(6);
    expect(fork.stderr).toMatch(/Cannot fork/);
    await sb.destroy();
  });

  it("caps each output stream with a marker", async () => {
    const sb = await provider({ maxOutputBytes: 1000 }).create("prog-cap");
    const r = await sb.exec(["sh", "-c", "head -c 5000 /dev/zero | tr '\\0' a"]);
    expect(r.stdout).toBe(`${"a".repeat(1000)}\n[arbor: output truncated, 4000 more bytes dropped]`);
    await sb.destroy();
  });

  it("never follows a symlink the sandbox planted when writing files", async () => {
    const sb = await provider().create("prog-link");
    const victim = join(root, "victim.txt");
    writeFileSync(victim, "untouched");
    chmodSync(victim, 0o644);
    await sb.exec(["sh", "-c", `ln -s ${victim} link && mkdir d && ln -s ${root} d/dirlink`]);
    await expect(sb.writeFile("link", "pwned")).rejects.toThrow(/cannot write 'link'/);
    await expect(sb.writeFile("d/dirlink/victim.txt", "pwned")).rejects.toThrow(/not a directory/);
    expect(readFileSync(victim, "utf8")).toBe("untouched");
    await sb.destroy();
  });

  it("caps every writable mount: root, /etc and /dev are read-only, /dev/shm and /tmp fill up, host memory stays put", async () => {
    // No cgroup: nothing but the mounts' own caps stands between these writes and host memory.
    const sb = await provider({ useCgroups: false, shmSizeMb: 8, tmpSizeMb: 8 }).create("prog-mounts");
    // Writes 100 MB to `path` and prints how much the host's shared memory (tmpfs pages) grew, kB.
    const fill = (path: string) =>
      sb.exec(["sh", "-c", `m() { awk '/^Shmem:/ { print $2 }' /proc/meminfo; }; a=$(m); head -c 100000000 /dev/zero > ${path}; rc=$?; echo $(( $(m) - a )); exit $rc`]);
    for (const path of ["/fill", "/etc/fill", "/dev/fill"]) {
      const r = await fill(path);
      expect(r.exitCode, `${path}: ${r.stderr}`).not.toBe(0);
      expect(r.stderr).toMatch(/Read-only file system/);
      expect(Number(r.stdout)).toBeLessThan(40_000);
    }
    for (const path of ["/dev/shm/fill", "/tmp/fill"]) {
      const r = await fill(path);
      expect(r.exitCode, path).not.toBe(0);
      expect(r.stderr).toMatch(/No space left on device/);
      expect(r.limit).toBe("disk");
      expect(Number(r.stdout)).toBeLessThan(40_000);
    }
    // The device nodes stay usable on the read-only /dev.
    expect((await sb.exec(["sh", "-c", "echo x > /dev/null && head -c 4 /dev/zero | wc -c"])).stdout).toBe("4\n");
    await sb.destroy();
  });

  it.skipIf(memoryEscapeFilter() === undefined)("refuses memfd_create and System V shared memory, which no mount caps", async () => {
    const sb = await provider({ useCgroups: false, limits: { ...LIMITS, memoryMb: 4096 } }).create("prog-memfd");
    const memfdCreate = process.arch === "arm64" ? 279 : 319;
    // perl (perl-base: on every Debian) calls memfd_create directly and writes 100 MB through the fd;
    // the host's shared memory would grow by that much with no sandbox limit firing.
    const perl = `my $a = shmem(); my $n = "arbor"; my $fd = syscall(${memfdCreate}, $n, 0);
      if ($fd < 0) { print "memfd_create: $!\\n"; exit 1 }
      open(my $fh, ">&=", $fd) or die; print $fh ("\\0" x 100000000) or die; $fh->flush;
      print "grew ", shmem() - $a, " kB\\n";
      sub shmem { open(my $m, "<", "/proc/meminfo"); while (<$m>) { return $1 if /^Shmem:\\s+(\\d+)/ } }`;
    const memfd = await sb.exec(["perl", "-e", perl]);
    expect(memfd.stdout).toBe("memfd_create: Function not implemented\n");
    expect(memfd.exitCode).toBe(1);
    const sysv = await sb.exec(["ipcmk", "-M", "100000000"]);
    expect(sysv.exitCode).not.toBe(0);
    expect(sysv.stderr).toMatch(/Function not implemented/);
    // Ordinary programs are unaffected (node reserves much address space: hence the larger memoryMb).
    expect((await sb.exec(["node", "-e", "console.log(require('os').arch())"])).stdout).toBe(`${process.arch}\n`);
    await sb.destroy();
  });

  it("shows no host path in /proc/1/environ and /proc/1/cmdline (bwrap's pid 1)", async () => {
    for (const useCgroups of [true, false]) {
      const sb = await provider({ useCgroups }).create("prog-proc1");
      const r = await sb.exec(["sh", "-c", "cat /proc/1/environ; echo; echo ---; cat /proc/1/cmdline"]);
      expect(r.exitCode).toBe(0);
      const [environ, cmdline] = r.stdout.split("\n---\n") as [string, string];
      for (const hostPath of [sb.hostWorkspace, root, process.cwd(), tmpdir()]) {
        expect(environ).not.toContain(hostPath);
        expect(cmdline).not.toContain(hostPath);
      }
      // Only what bwrap needs (a shell joining the cgroups adds PWD, the neutral "/").
      for (const v of environ.split("\0").filter(Boolean)) expect(["PATH=/usr/bin:/bin", "PWD=/"]).toContain(v);
      expect(cmdline.split("\0").slice(0, 3)).toEqual([DEFAULT_BINARIES.bwrap, "--args", "4"]);
      await sb.destroy();
    }
  });

  it("returns a failed result naming the limit for a 3 MB argv or environment instead of throwing", async () => {
    const sb = await provider().create("prog-e2big");
    const big = "a".repeat(3_000_000);
    const tenth = "b".repeat(100_000);
    const cases: [string[], Record<string, string> | undefined, RegExp][] = [
      [["echo", big], undefined, /argv\[1\] is 3000000 bytes, over the sandbox's limit of 131071 bytes .*MAX_ARG_STRLEN/],
      [["echo", ...Array<string>(30).fill(tenth)], undefined, /argv and environment take \d+ bytes, over the sandbox's limit of 1048576 bytes \(ARG_MAX\)/],
      [["true"], { BIG: big }, /env BIG is 3000004 bytes, over the sandbox's limit/],
      [["true"], Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`V${i}`, tenth])), /take \d+ bytes, over .*ARG_MAX/],
      [["true", ...Array<string>(3000).fill("x")], undefined, /3001 entries, over the sandbox's limit of 2048/],
    ];
    for (const [argv, env, message] of cases) {
      const r = await sb.exec(argv, env ? { env } : {});
      expect(r).toMatchObject({ exitCode: 126, signal: null, stdout: "", timedOut: false, limit: "arguments" });
      expect(r.stderr).toMatch(message);
    }
    // Just under the limits it runs; a command that builds a too-long argv itself is classified too.
    const ok = await sb.exec(["sh", "-c", 'printf %s "$1" | wc -c', "sh", "c".repeat(131_071)]);
    expect(ok).toMatchObject({ exitCode: 0, stdout: "131071\n" });
    expect(ok.limit).toBeUndefined();
    const inner = await sb.exec(["sh", "-c", 'exec /bin/true "$(head -c 3000000 /dev/zero | tr "\\0" a)"']);
    expect(inner.exitCode).not.toBe(0);
    expect(inner.stderr).toMatch(/Argument list too long/);
    expect(inner.limit).toBe("arguments");
    await sb.destroy();
  });

  it("enforces the sandbox count limit", async () => {
    const p = provider({ maxSandboxes: 1 });
    await p.create("prog-one");
    await expect(p.create("prog-two")).rejects.toThrow("bwrap sandbox provider is full (limit 1)");
    await p.destroyAll();
  });
});

describe("bwrap cleanup when Node dies", () => {
  const children: ChildProcess[] = [];
  afterAll(() => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  });

  const script = (marker: string, exitHow: string): string => `
    import { createBwrapProvider } from ${JSON.stringify(resolve(here, "bwrap.ts"))};
    const p = createBwrapProvider({ root: ${JSON.stringify(root)}, limits: { cpuSeconds: 5, memoryMb: 256, wallMs: 60000 } });
    const sb = await p.create("prog-exit");
    void sb.exec(["sh", "-c", "sleep 300; : ${marker}"]);
    console.log(sb.hostWorkspace);
    process.stdin.once("data", () => { ${exitHow} });
  `;

  async function runChild(marker: string, exitHow: string): Promise<{ ws: string; kill: () => void; exited: Promise<void> }> {
    const file = join(root, `${marker}.mts`);
    writeFileSync(file, script(marker, exitHow));
    const child = spawn(process.execPath, ["--import", "tsx", file], { stdio: ["pipe", "pipe", "inherit"] });
    children.push(child);
    const exited = new Promise<void>((res) => child.on("exit", () => res()));
    const ws = await new Promise<string>((res, rej) => {
      child.stdout.once("data", (d: Buffer) => res(d.toString().trim()));
      child.once("exit", (code) => rej(new Error(`child exited early with ${code}`)));
    });
    await waitFor(() => markerShells(marker).length === 1, 20_000);
    return { ws, kill: () => child.stdin.write("go\n"), exited };
  }

  it("removes workspaces and processes on process.exit", async () => {
    const marker = `arbor-marker-${process.pid}-exit`;
    const c = await runChild(marker, "process.exit(3);");
    expect(existsSync(c.ws)).toBe(true);
    c.kill();
    await c.exited;
    expect(existsSync(c.ws)).toBe(false);
    await waitFor(() => pidsWithCmdline(marker).length === 0);
  });

  it("leaves no sandbox process behind when Node is SIGKILLed", async () => {
    const marker = `arbor-marker-${process.pid}-sigkill`;
    const c = await runChild(marker, "process.kill(process.pid, 'SIGKILL');");
    const inside = workspaceProcesses(c.ws);
    expect(inside().length).toBeGreaterThanOrEqual(2); // bwrap's pid 1 and the marked shell
    // The sandbox's groups are checked while their owner lives: once it is dead, any provider in
    // the other test worker may sweep them (groups are swept machine-wide, workspaces per root).
    const groups = sandboxCgroupDirs(basename(c.ws));
    expect(groups.every((g) => existsSync(g))).toBe(true);
    c.kill();
    await c.exited;
    await waitFor(() => pidsWithCmdline(marker).length === 0 && inside().length === 0);
    // No exit hook can run on SIGKILL: the workspace stays until the next provider on this root
    // sweeps workspaces whose owner is dead — and only those.
    expect(existsSync(c.ws)).toBe(true);
    expect(provider().sweptOnStart).toContain(basename(c.ws));
    expect(existsSync(c.ws)).toBe(false);
    expect(mountsUnder(c.ws)).toEqual([]);
    expect(groups.filter((g) => existsSync(g))).toEqual([]);
    const mine = await provider().create("prog-live");
    expect(provider().sweptOnStart).not.toContain(basename(mine.hostWorkspace));
    expect(existsSync(mine.hostWorkspace)).toBe(true);
    await mine.destroy();
  });
});
