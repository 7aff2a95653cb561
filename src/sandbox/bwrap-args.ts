// Builds the command line that runs one process in a bubblewrap sandbox: setpriv (drop to an
// unprivileged uid, die with Node) → bwrap (namespaces, read-only system, workspace) → prlimit.
// Every writable mount is size-capped (/tmp, /dev/shm; the workspace by its own tmpfs) and the rest
// is read-only, so files a command writes cannot take host memory past the caps.
import { lstatSync, readlinkSync } from "node:fs";
import { posix } from "node:path";
import type { ReadOnlyMount } from "./sandbox.js";

/** Mount point of the workspace inside the sandbox. */
export const SANDBOX_WORKSPACE = "/workspace";

/** Host paths of the helper binaries. */
export interface SandboxBinaries {
  bwrap: string;
  setpriv: string;
  prlimit: string;
}

export const DEFAULT_BINARIES: SandboxBinaries = {
  bwrap: "/usr/bin/bwrap",
  setpriv: "/usr/bin/setpriv",
  prlimit: "/usr/bin/prlimit",
};

/** Everything that shapes one sandboxed process. */
export interface BwrapCommand {
  binaries: SandboxBinaries;
  hostWorkspace: string;
  argv: string[];
  /** Working directory inside the sandbox; relative paths are taken from the workspace. */
  cwd?: string;
  env?: Record<string, string>;
  /** Uid/gid the sandbox runs as on the host; null keeps the caller's (non-root callers). */
  uid: number | null;
  cpuSeconds: number;
  memoryMb: number;
  /** RLIMIT_NPROC for the sandbox's uid inside its own user namespace (counts bwrap's init too). */
  maxProcesses: number;
  /** RLIMIT_FSIZE: largest file a sandboxed process may write, MiB. */
  maxFileMb: number;
  /** Size of the private /tmp tmpfs, MiB. */
  tmpSizeMb: number;
  /** Size of the private /dev/shm tmpfs, MiB. */
  shmSizeMb: number;
  /** File descriptor (in the spawned process) where bwrap writes its info JSON. */
  infoFd: number;
  /** File descriptor from which bwrap reads a seccomp filter (see seccomp.ts), if any. */
  seccompFd?: number;
  /**
   * `cgroup.procs` files of the sandbox's cgroups: the first process joins them (while still
   * privileged, before setpriv) so that everything it starts is counted and capped there.
   */
  cgroupProcs?: readonly string[];
  /** Host folders bound read-only into the sandbox (an agent's install), checked by read-only-mounts.ts. */
  readOnlyMounts?: readonly ReadOnlyMount[];
}

/** Shell used to join the cgroups before exec'ing setpriv (the pid stays the same). */
const JOIN_CGROUPS =
  'while [ "$1" != -- ]; do echo $$ > "$1" || { echo "arbor: cannot join cgroup $1" >&2; exit 125; }; shift; done; shift; exec "$@"';

const BASE_ENV: Record<string, string> = {
  PATH: "/usr/local/bin:/usr/bin:/bin",
  HOME: SANDBOX_WORKSPACE,
  TMPDIR: "/tmp",
  LANG: "C.UTF-8",
};

// Only what ordinary tools need: alternatives (awk, which, ...), the loader cache and name databases.
// The rest of /etc (shadow, ssh keys, service configs) stays invisible.
const ETC_FILES = [
  "/etc/alternatives",
  "/etc/ld.so.cache",
  "/etc/ld.so.conf",
  "/etc/ld.so.conf.d",
  "/etc/passwd",
  "/etc/group",
  "/etc/nsswitch.conf",
  "/etc/hosts",
  "/etc/localtime",
];

// Top-level system paths that are symlinks into /usr on merged-/usr hosts and real dirs elsewhere.
const ROOT_SYSTEM_DIRS = ["/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"];

let rootLayout: string[] | undefined;

/** bwrap arguments that reproduce the host's /bin, /lib, ... layout (cached: it never changes). */
function systemDirArgs(): string[] {
  if (rootLayout) return rootLayout;
  const args: string[] = [];
  for (const dir of ROOT_SYSTEM_DIRS) {
    try {
      const st = lstatSync(dir);
      if (st.isSymbolicLink()) args.push("--symlink", readlinkSync(dir), dir);
      else if (st.isDirectory()) args.push("--ro-bind", dir, dir);
    } catch {
      // absent on this host: nothing to mirror
    }
  }
  rootLayout = args;
  return args;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The parts of one sandboxed process's command line. */
interface BwrapParts {
  /** The cgroup-joining shell and setpriv, then the bwrap binary. */
  head: string[];
  /** bwrap's options (mounts, environment, namespaces): everything that names host paths. */
  options: string[];
  /** prlimit and the command, after bwrap's `--`. */
  tail: string[];
}

function bwrapParts(c: BwrapCommand): BwrapParts {
  if (c.argv.length === 0) throw new Error("exec: argv must not be empty");
  for (const a of c.argv) {
    if (typeof a !== "string" || a.includes("\0")) throw new Error("exec: argv entries must be strings without NUL");
  }
  const cwd = c.cwd === undefined ? SANDBOX_WORKSPACE : posix.resolve(SANDBOX_WORKSPACE, c.cwd);

  const setpriv = [c.binaries.setpriv];
  if (c.uid !== null) setpriv.push(`--reuid=${c.uid}`, `--regid=${c.uid}`, "--clear-groups");
  // Kill bwrap when Node dies (even by SIGKILL); bwrap's --die-with-parent carries it inward.
  setpriv.push("--pdeathsig", "KILL", "--");

  const env: Record<string, string> = { ...BASE_ENV, ...(c.env ?? {}) };
  const envArgs: string[] = [];
  for (const [k, v] of Object.entries(env)) {
    if (!ENV_NAME.test(k)) throw new Error(`exec: env name '${k}' is invalid (letters, digits, _)`);
    if (v.includes("\0")) throw new Error(`exec: env ${k} contains NUL`);
    envArgs.push("--setenv", k, v);
  }

  const options = [
    "--unshare-all",
    "--unshare-user",
    "--disable-userns",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--hostname",
    "arbor-sandbox",
    "--clearenv",
    ...envArgs,
    "--ro-bind",
    "/usr",
    "/usr",
    ...systemDirArgs(),
  ];
  for (const f of ETC_FILES) options.push("--ro-bind-try", f, f);
  options.push(
    "--proc",
    "/proc",
    // bwrap's /dev is an uncapped tmpfs holding the device nodes and /dev/shm: make it read-only
    // (device nodes stay usable) and give /dev/shm a capped tmpfs of its own.
    "--dev",
    "/dev",
    "--remount-ro",
    "/dev",
    "--size",
    String(Math.floor(c.shmSizeMb * 1024 * 1024)),
    "--tmpfs",
    "/dev/shm",
    "--size",
    String(Math.floor(c.tmpSizeMb * 1024 * 1024)),
    "--tmpfs",
    "/tmp",
    "--bind",
    c.hostWorkspace,
    SANDBOX_WORKSPACE,
  );
  // Read-only: the agent's install is shared by every sandbox, so no program may change it.
  for (const m of c.readOnlyMounts ?? []) options.push("--ro-bind", m.hostPath, m.sandboxPath);
  options.push(
    // The root (and /etc, made on it for the files above) is bwrap's own uncapped tmpfs: once every
    // mount point exists, nothing needs to write there. --remount-ro is not recursive.
    "--remount-ro",
    "/",
    "--chdir",
    cwd,
    "--info-fd",
    String(c.infoFd),
  );
  if (c.seccompFd !== undefined) options.push("--seccomp", String(c.seccompFd));

  // Soft CPU limit raises SIGXCPU; the hard limit one second later kills a process that ignores it.
  const prlimit = [
    c.binaries.prlimit,
    `--cpu=${c.cpuSeconds}:${c.cpuSeconds + 1}`,
    `--as=${Math.floor(c.memoryMb * 1024 * 1024)}`,
    `--nproc=${c.maxProcesses}`,
    `--fsize=${Math.floor(c.maxFileMb * 1024 * 1024)}`,
    "--",
  ];
  const join = c.cgroupProcs?.length ? ["/bin/sh", "-c", JOIN_CGROUPS, "arbor-cgroup", ...c.cgroupProcs, "--"] : [];
  return { head: [...join, ...setpriv, c.binaries.bwrap], options, tail: [...prlimit, ...c.argv] };
}

/** The full argv (argv[0] is setpriv) for one sandboxed process. Throws on invalid input. */
export function buildBwrapArgv(c: BwrapCommand): string[] {
  const p = bwrapParts(c);
  return [...p.head, ...p.options, "--", ...p.tail];
}

/**
 * The command line for one sandboxed process with bwrap's options passed on file descriptor
 * `argsFd` (bwrap `--args`) instead of argv: bwrap's process is the sandbox's pid 1, whose
 * /proc/1/cmdline every sandboxed process can read, and its options name host paths (the
 * workspace). `argsData` is what to write to that descriptor. Throws on invalid input.
 */
export function buildBwrapCommand(c: BwrapCommand, argsFd: number): { argv: string[]; argsData: Buffer } {
  const p = bwrapParts(c);
  const argsData = Buffer.from(p.options.map((o) => `${o}\0`).join(""), "utf8");
  return { argv: [...p.head, "--args", String(argsFd), "--", ...p.tail], argsData };
}
