// Makes installed npm packages importable by a black-box command: each package (runtime files only)
// under the workspace's node_modules, owned by the host user, so a sandbox running as another uid
// (bwrap as root drops to 65534) can read but never change it. The sandbox sees only its
// workspace, hence not a bind mount: files are hard links when that is safe (we are root, so the
// sandbox is another uid, the file is not writable by others, same filesystem) and copies
// otherwise — a sandbox running as our own uid could write through a link into the project.
import { existsSync } from "node:fs";
import { copyFile, link, mkdir, readdir, readFile, stat } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ArborError } from "../../core/errors.js";

const PACKAGE_NAME = /^(@[a-z0-9][\w.-]*\/)?[a-z0-9][\w.-]*$/i;
// Declarations and source maps are never loaded at run time.
const SKIP = /\.(d\.[cm]?ts|map)$/;

/** Directory of an installed package, found like Node does from this module upwards. */
export function packageDir(name: string, from = dirname(fileURLToPath(import.meta.url))): string {
  if (!PACKAGE_NAME.test(name)) throw new ArborError(`blackbox: invalid package name '${name}'`, "config");
  for (let d = resolve(from); ; d = dirname(d)) {
    const candidate = join(d, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return candidate;
    if (dirname(d) === d) throw new ArborError(`blackbox: package '${name}' is not installed (looked upwards from ${from})`, "config");
  }
}

/** Copy the packages and their runtime dependencies into `<workspace>/node_modules`. Returns their paths there. */
export async function copyNodePackages(hostWorkspace: string, names: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  const todo = [...names];
  const seen = new Set<string>();
  while (todo.length > 0) {
    const name = todo.shift() as string;
    if (seen.has(name)) continue;
    seen.add(name);
    const src = packageDir(name);
    const text = await readFile(join(src, "package.json"), "utf8");
    const manifest = JSON.parse(text) as { dependencies?: Record<string, string> };
    todo.push(...Object.keys(manifest.dependencies ?? {}));
    // Many packages ship their TypeScript sources in src/ beside the build; skip it unless the manifest points there.
    const skipSrc = !/["/]src\//.test(text);
    const dest = join(hostWorkspace, "node_modules", name);
    await mkdir(dirname(dest), { recursive: true, mode: 0o755 });
    await mirrorTree(src, dest, process.getuid?.() === 0, skipSrc ? join(src, "src") : undefined);
    out.push(join("node_modules", name));
  }
  return out;
}

/** Recreate `src` at `dest`: directories made, files hard-linked (when `mayLink`) or copied. */
async function mirrorTree(src: string, dest: string, mayLink: boolean, skipDir?: string): Promise<void> {
  await mkdir(dest, { recursive: true, mode: 0o755 });
  for (const entry of await readdir(src, { withFileTypes: true })) {
    const from = join(src, entry.name);
    const to = join(dest, entry.name);
    // Symlinks are followed: the sandbox could not resolve a link that points outside the workspace.
    const st = entry.isSymbolicLink() ? await stat(from) : undefined;
    if (entry.isDirectory() || st?.isDirectory()) {
      if (from !== skipDir) await mirrorTree(from, to, mayLink);
      continue;
    }
    if (SKIP.test(entry.name)) continue;
    const { mode, uid } = st ?? (await stat(from));
    // A link shares the file: only ours (root's), and writable by nobody else, may be shared.
    if (mayLink && uid === process.getuid?.() && (mode & 0o022) === 0) {
      try {
        await link(from, to);
        continue;
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code !== "EXDEV" && code !== "EPERM" && code !== "EMLINK") throw e;
      }
    }
    await copyFile(from, to);
  }
}
