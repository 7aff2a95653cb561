// A black-box agent's install (`agent.install`): a folder, or an npm package Arbor installs once
// into a cache folder before the run. Every sandbox sees it read-only at AGENT_MOUNT; nothing of it
// is copied into a workspace, so an install of hundreds of megabytes with native binaries costs a
// program nothing.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, statSync } from "node:fs";
import { chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { ArborError } from "../../core/errors.js";
import { fileSafeName } from "../../core/file-safe-name.js";

/** Where every sandbox sees the install (read-only). */
export const AGENT_MOUNT = "/opt/agent";
/** The marker written once an npm install has completed (a folder without it is not used). */
export const INSTALL_MARKER = ".arbor-install.json";
const DEFAULT_TIMEOUT_MS = 300_000;
/** npm's output kept for the error message. */
const MAX_NPM_OUTPUT = 4 * 1024 * 1024;
const NPM_NAME = /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/;
const EXACT_VERSION = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;

export interface AgentInstallOptions {
  /** Folder holding npm installs, one sub-folder per package, version, platform and Node major. */
  cacheDir: string;
  /** The npm command (default `npm`, the machine's). */
  npm?: string;
  /** Longest an npm install may take, ms (default 300 s); it is killed past it. */
  timeoutMs?: number;
  /** Relative folders are taken from here (default the working directory). */
  cwd?: string;
}

export interface AgentInstall {
  /** The configured value. */
  spec: string;
  /** The host folder every sandbox mounts read-only at {@link AGENT_MOUNT}. */
  hostPath: string;
  /** The npm package and exact version, for an npm install. */
  npm?: { name: string; version: string };
  /** Whether this call ran npm (false: a folder, or an install already in the cache). */
  installed: boolean;
}

/** Parse `npm:<name>@<exact version>`; undefined for anything not starting with `npm:`. Throws naming the field on a bad spec. */
export function parseNpmSpec(spec: string): { name: string; version: string } | undefined {
  if (!spec.startsWith("npm:")) return undefined;
  const body = spec.slice(4);
  const at = body.lastIndexOf("@");
  const name = at > 0 ? body.slice(0, at) : body;
  const version = at > 0 ? body.slice(at + 1) : "";
  if (!NPM_NAME.test(name)) throw new ArborError(`agent.install: '${spec}' does not name an npm package (npm:<name>@<version>)`, "config");
  if (!EXACT_VERSION.test(version)) {
    throw new ArborError(`agent.install: '${spec}' needs an exact version (npm:${name}@1.2.3): the cache and every program must hold the same agent`, "config");
  }
  return { name, version };
}

/** The cache folder of one npm install: the package, its version, this platform and Node's major version. */
export function npmInstallDir(cacheDir: string, name: string, version: string): string {
  const key = `${name}@${version}|${process.platform}-${process.arch}|node${process.versions.node.split(".")[0]}`;
  const hash = createHash("sha256").update(key).digest("hex").slice(0, 16);
  return join(resolve(cacheDir), `${fileSafeName(name)}-${version}-${hash}`);
}

/**
 * The host folder of `spec` (a folder path, or `npm:<name>@<version>` installed into the cache
 * with `npm install --prefix` once: later runs reuse it). Throws an ArborError naming
 * `agent.install` when the folder is missing or npm fails or runs past its time.
 */
export async function resolveAgentInstall(spec: string, o: AgentInstallOptions): Promise<AgentInstall> {
  const pkg = parseNpmSpec(spec);
  if (!pkg) {
    const hostPath = resolve(o.cwd ?? process.cwd(), spec);
    if (!existsSync(hostPath)) throw new ArborError(`agent.install: folder ${hostPath} does not exist`, "config");
    if (!statSync(hostPath).isDirectory()) throw new ArborError(`agent.install: ${hostPath} is not a folder`, "config");
    return { spec, hostPath, installed: false };
  }
  const dir = npmInstallDir(o.cacheDir, pkg.name, pkg.version);
  if (existsSync(join(dir, INSTALL_MARKER))) return { spec, hostPath: dir, npm: pkg, installed: false };
  await mkdir(resolve(o.cacheDir), { recursive: true, mode: 0o755 });
  // Sandboxes run as another uid: the cache must be readable by it.
  await chmod(resolve(o.cacheDir), 0o755);
  // Installed beside its final place and renamed: a killed install never looks complete.
  const partial = `${dir}.partial-${process.pid}`;
  await rm(partial, { recursive: true, force: true });
  await mkdir(partial, { mode: 0o755 });
  try {
    await runNpm(o.npm ?? "npm", ["install", "--prefix", partial, "--no-audit", "--no-fund", "--no-save", "--include=optional", "--omit=dev", `${pkg.name}@${pkg.version}`], partial, o.timeoutMs ?? DEFAULT_TIMEOUT_MS, spec);
    const manifest = join(partial, "node_modules", pkg.name, "package.json");
    const got = existsSync(manifest) ? (JSON.parse(await readFile(manifest, "utf8")) as { version?: string }).version : undefined;
    if (got !== pkg.version) throw new ArborError(`agent.install: npm install of ${spec} left ${got === undefined ? "no package" : `version ${got}`} in ${partial}`, "config");
    await writeFile(join(partial, INSTALL_MARKER), `${JSON.stringify({ spec, node: process.version, platform: `${process.platform}-${process.arch}` })}\n`, { mode: 0o644 });
    try {
      await rename(partial, dir);
    } catch (e) {
      // Another run installed the same package meanwhile: use its folder.
      if (!existsSync(join(dir, INSTALL_MARKER))) throw e;
      await rm(partial, { recursive: true, force: true });
    }
  } catch (e) {
    await rm(partial, { recursive: true, force: true });
    throw e;
  }
  return { spec, hostPath: dir, npm: pkg, installed: true };
}

/** Run npm with a time limit and an environment free of the calling npm's settings (e.g. `omit=optional`). */
function runNpm(npm: string, args: string[], cwd: string, timeoutMs: number, spec: string): Promise<void> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^npm_/i.test(k)) env[k] = v;
  return new Promise((done, fail) => {
    execFile(npm, args, { cwd, env, timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: MAX_NPM_OUTPUT }, (err, _stdout, stderr) => {
      if (!err) return done();
      const e = err as NodeJS.ErrnoException & { killed?: boolean; code?: number | string };
      const why = e.killed ? `ran past ${timeoutMs} ms and was killed` : e.code === "ENOENT" ? `cannot run '${npm}' (not installed?)` : `failed (exit ${String(e.code)})`;
      const tail = String(stderr).trim().split("\n").slice(-5).join(" | ").slice(-800);
      fail(new ArborError(`agent.install: npm install of ${spec} ${why}${tail ? `: ${tail}` : ""}`, "config"));
    });
  });
}
