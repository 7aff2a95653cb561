// Validation of the read-only mounts a provider gives every sandbox (an agent's install): the
// sandbox path must be absolute and clear of the paths the providers mount themselves, and (for
// providers that mount from this host) the host folder must exist and be readable by the sandbox.
import { statSync } from "node:fs";
import { dirname, isAbsolute, posix } from "node:path";
import { ArborError } from "../core/errors.js";
import type { ReadOnlyMount } from "./sandbox.js";

/** Sandbox paths a read-only mount may not cover or sit under: the providers' own mounts and the system. */
const RESERVED = ["/workspace", "/tmp", "/proc", "/dev", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/sys"];
/** More would only be a configuration mistake; each is one mount per exec. */
export const MAX_READ_ONLY_MOUNTS = 8;

/**
 * Check `mounts`; throws an ArborError naming the field and the reason. With `uid` (the sandbox's
 * host uid, bwrap/docker) the host folders must exist on this host and be reachable by that uid.
 */
export function checkReadOnlyMounts(mounts: readonly ReadOnlyMount[], opts: { onThisHost: boolean; uid?: number | null }): ReadOnlyMount[] {
  if (mounts.length > MAX_READ_ONLY_MOUNTS) {
    throw new ArborError(`sandbox: readOnlyMounts: at most ${MAX_READ_ONLY_MOUNTS}, got ${mounts.length}`, "config");
  }
  const seen = new Set<string>();
  return mounts.map((m, i) => {
    const field = `sandbox: readOnlyMounts[${i}]`;
    if (typeof m.sandboxPath !== "string" || !posix.isAbsolute(m.sandboxPath) || m.sandboxPath.includes("\0")) {
      throw new ArborError(`${field}.sandboxPath must be an absolute path, got '${String(m.sandboxPath)}'`, "config");
    }
    const target = posix.normalize(m.sandboxPath).replace(/\/+$/, "");
    if (target === "") throw new ArborError(`${field}.sandboxPath must not be the root`, "config");
    const clash = RESERVED.find((r) => target === r || target.startsWith(`${r}/`) || r.startsWith(`${target}/`));
    if (clash !== undefined) throw new ArborError(`${field}.sandboxPath '${target}' overlaps ${clash}, which the sandbox mounts itself`, "config");
    if (seen.has(target)) throw new ArborError(`${field}.sandboxPath '${target}' is mounted twice`, "config");
    seen.add(target);
    if (typeof m.hostPath !== "string" || !isAbsolute(m.hostPath) || m.hostPath.includes("\0")) {
      throw new ArborError(`${field}.hostPath must be an absolute path, got '${String(m.hostPath)}'`, "config");
    }
    if (opts.onThisHost) {
      let st;
      try {
        st = statSync(m.hostPath);
      } catch {
        throw new ArborError(`${field}.hostPath ${m.hostPath} does not exist`, "config");
      }
      if (!st.isDirectory()) throw new ArborError(`${field}.hostPath ${m.hostPath} is not a folder`, "config");
      if (opts.uid !== undefined && opts.uid !== null) checkReachable(field, m.hostPath, opts.uid);
    }
    return { hostPath: m.hostPath, sandboxPath: target };
  });
}

/** The sandbox's uid must be able to reach (x) every ancestor and read the folder itself. */
function checkReachable(field: string, dir: string, uid: number): void {
  for (let d = dir; ; d = dirname(d)) {
    const st = statSync(d);
    const bits = st.uid === uid ? (st.mode >> 6) & 7 : st.mode & 7;
    const need = d === dir ? 5 : 1;
    if ((bits & need) !== need) {
      throw new ArborError(`${field}.hostPath ${dir} is not readable by the sandbox uid ${uid}: ${d} lacks ${d === dir ? "r-x" : "x"} for others (chmod o+rx, or choose another folder)`, "config");
    }
    if (dirname(d) === d) return;
  }
}
