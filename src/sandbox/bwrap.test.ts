import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBwrapArgv, DEFAULT_BINARIES } from "./bwrap-args.js";
import { BwrapProvider, bwrapAvailable, createBwrapProvider } from "./bwrap.js";
import { describeSandboxContract, markerShells, pidsWithCmdline, waitFor } from "./contract.js";
import { createSandboxProvider, sandboxProviderNames } from "./registry.js";
import { sandboxCgroupDirs } from "./cgroup.js";
import { mountsUnder } from "./workspace-mount.js";
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

  it("rejects bad limits and an unreachable root", () => {
    expect(() => createBwrapProvider({ root, limits: { ...LIMITS, cpuSeconds: 0.5 } })).toThrow(
      "sandbox: limits.cpuSeconds must be a positive integer, got 0.5",
    );
    if (process.getuid?.() !== 0) return;
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
  it("runs as an unprivileged uid with a process-count limit", async () => {
    if (process.getuid?.() !== 0) return;
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
    c.kill();
    await c.exited;
    await waitFor(() => pidsWithCmdline(marker).length === 0 && pidsWithCmdline(c.ws).length === 0);
    // No exit hook can run on SIGKILL: the workspace stays until the next provider on this root
    // sweeps workspaces whose owner is dead — and only those.
    expect(existsSync(c.ws)).toBe(true);
    const groups = sandboxCgroupDirs(basename(c.ws));
    expect(groups.every((g) => existsSync(g))).toBe(true);
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
