// scripts/setup.sh (the README's first command and CI's first step), run with a PATH that holds only
// what each case needs: real bash, dirname and node, and recording stand-ins for id, sudo, apt-get
// and npm, so that what it would install, and how, is checked without touching this machine.
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const script = resolve(fileURLToPath(new URL(".", import.meta.url)), "../../scripts/setup.sh");
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function which(cmd: string): string {
  const r = spawnSync("/bin/sh", ["-c", `command -v ${cmd}`], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${cmd} is not installed on this machine`);
  return r.stdout.trim();
}

interface Case {
  uid: number;
  /** Real commands linked into PATH besides bash, dirname and node (e.g. "bwrap"). */
  present?: string[];
  /** Stand-ins that record their argv and succeed (e.g. "sudo", "apt-get", "npm"). */
  fakes?: string[];
  args?: string[];
  /** A node stand-in that reports this version instead of the real node. */
  nodeVersion?: string;
  /** Environment variables besides PATH. */
  env?: Record<string, string>;
}

/** Runs scripts/setup.sh in such a PATH; returns its output and the stand-ins' recorded calls. */
function setup(c: Case): { status: number | null; out: string; calls: string[] } {
  const dir = mkdtempSync(join(tmpdir(), "arbor-setup-test-"));
  dirs.push(dir);
  const bin = join(dir, "bin");
  const log = join(dir, "calls.log");
  mkdirSync(bin);
  const fake = (name: string, body: string): void => {
    writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`);
    chmodSync(join(bin, name), 0o755);
  };
  for (const cmd of ["bash", "dirname", ...(c.nodeVersion ? [] : ["node"]), ...(c.present ?? [])]) symlinkSync(which(cmd), join(bin, cmd));
  if (c.nodeVersion) fake("node", `[ "$1" = --version ] && echo v${c.nodeVersion}; [ "$1" = -e ] && exit 1; exit 0`);
  fake("id", `echo ${c.uid}`);
  for (const name of c.fakes ?? []) fake(name, `echo "${name} $*" >> ${log}`);
  const r = spawnSync(script, c.args ?? [], { encoding: "utf8", env: { PATH: bin, ...c.env } });
  return { status: r.status, out: `${r.stdout}${r.stderr}`, calls: existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : [] };
}

const ALL_BUT_BWRAP = ["setpriv", "prlimit", "strace", "bc", "patch"];

describe("scripts/setup.sh", () => {
  it("--dry-run on a machine without bwrap: lists what it would install with sudo, runs nothing", () => {
    const r = setup({ uid: 1000, present: ALL_BUT_BWRAP, fakes: ["sudo", "apt-get", "npm"], args: ["--dry-run"] });
    expect(r.out).toBe(
      [
        "setup: installing system packages: bubblewrap (needs root: asking for sudo)",
        "setup: would run: sudo apt-get update -qq",
        "setup: would run: sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap",
        "setup: would run: npm ci --no-audit --no-fund",
        "",
      ].join("\n"),
    );
    expect(r.status).toBe(0);
    expect(r.calls).toEqual([]);
  });

  it("lists every missing package once, and uses no sudo as root", () => {
    const r = setup({ uid: 0, fakes: ["apt-get", "npm"], args: ["--dry-run"] });
    expect(r.out).toContain("setup: installing system packages: bubblewrap util-linux strace bc patch (as root)\n");
    expect(r.out).toContain("setup: would run: env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap util-linux strace bc patch\n");
    expect(r.status).toBe(0);
  });

  it("installs through sudo, then runs npm ci (for real, with recording stand-ins)", () => {
    const r = setup({ uid: 1000, present: ALL_BUT_BWRAP, fakes: ["sudo", "apt-get", "npm"] });
    expect(r.calls).toEqual([
      "sudo apt-get update -qq",
      "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap",
      "npm ci --no-audit --no-fund",
    ]);
    expect(r.out).toMatch(/setup: done\n$/);
    expect(r.status).toBe(0);
  });

  it("with everything present installs nothing and runs npm ci", () => {
    const r = setup({ uid: 1000, present: ["bwrap", ...ALL_BUT_BWRAP], fakes: ["sudo", "apt-get", "npm"] });
    expect(r.calls).toEqual(["npm ci --no-audit --no-fund"]);
    expect(r.out).toContain("setup: system packages present");
    expect(r.status).toBe(0);
  });

  it("stops with a clear message where it cannot install: no sudo, no apt-get, old Node, bad option", () => {
    const noSudo = setup({ uid: 1000, present: ALL_BUT_BWRAP, fakes: ["apt-get", "npm"] });
    expect(noSudo.status).toBe(1);
    expect(noSudo.out).toContain("setup: installing bubblewrap needs root and sudo is not installed: run this script as root");
    expect(noSudo.calls).toEqual([]);
    const noApt = setup({ uid: 0, present: ALL_BUT_BWRAP, fakes: ["npm"] });
    expect(noApt.status).toBe(1);
    expect(noApt.out).toContain("setup: no apt-get here: install bubblewrap with your package manager, then run this again");
    expect(noApt.calls).toEqual([]);
    const oldNode = setup({ uid: 0, nodeVersion: "18.19.0", fakes: ["apt-get", "npm"] });
    expect(oldNode.status).toBe(1);
    expect(oldNode.out).toBe("setup: Node.js v18.19.0 is too old: Arbor needs Node.js >= 20.19\n");
    expect(oldNode.calls).toEqual([]);
    const bad = setup({ uid: 0, args: ["--fast"] });
    expect(bad.status).toBe(2);
    expect(bad.out).toContain("setup: unknown option '--fast'");
  });

  it("--llama-server adds the build tools (best effort) and the llama-server build", () => {
    const r = setup({ uid: 0, present: ["bwrap", ...ALL_BUT_BWRAP], fakes: ["apt-get", "npm"], args: ["--dry-run", "--llama-server"] });
    expect(r.out).toContain("setup: installing the llama-server build tools (best effort): cmake ninja-build g++ git\n");
    expect(r.out).toContain("setup: would run: scripts/build-llama-server.sh\n");
    expect(r.status).toBe(0);
  });

  it("--python installs Debian's numpy and torch (best effort) where the interpreter lacks them, and nothing where it has them", () => {
    const missing = setup({ uid: 0, present: ["bwrap", ...ALL_BUT_BWRAP], fakes: ["apt-get", "npm"], args: ["--dry-run", "--python"], env: { ARBOR_PYTHON: "/bin/false" } });
    expect(missing.out).toContain("setup: installing python3-numpy and python3-torch (best effort)\n");
    expect(missing.out).toContain("setup: would run: env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-numpy python3-torch\n");
    expect(missing.status).toBe(0);
    const present = setup({ uid: 0, present: ["bwrap", ...ALL_BUT_BWRAP], fakes: ["apt-get", "npm"], args: ["--dry-run", "--python"], env: { ARBOR_PYTHON: "/bin/true" } });
    expect(present.out).toContain("setup: python3-numpy and python3-torch present\n");
    expect(present.out).not.toContain("python3-torch\n");
  });

  it("--browser installs Debian's chromium (best effort) where it is missing, and nothing where it is present", () => {
    const missing = setup({ uid: 0, present: ["bwrap", ...ALL_BUT_BWRAP], fakes: ["apt-get", "npm"], args: ["--dry-run", "--browser"] });
    expect(missing.out).toContain("setup: installing chromium (best effort)\n");
    expect(missing.out).toContain("setup: would run: env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium\n");
    expect(missing.status).toBe(0);
    const present = setup({ uid: 0, present: ["bwrap", ...ALL_BUT_BWRAP], fakes: ["apt-get", "npm", "chromium"], args: ["--dry-run", "--browser"] });
    expect(present.out).toContain("setup: chromium present\n");
    expect(present.out).not.toContain("apt-get install");
  });
});
