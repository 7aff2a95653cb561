// Writing into a sandbox's workspace from the host (providers whose workspace is a host
// directory: bwrap, docker): the path must stay inside, and a symlink the sandbox planted is
// never followed, since the host writes with more rights than the sandbox has.
import { constants as fsConstants } from "node:fs";
import { chown, lstat, mkdir, open } from "node:fs/promises";
import { join, resolve, sep } from "node:path";
import { ArborError } from "../core/errors.js";

/**
 * Write `data` to `relPath` under the host directory `workspace`, creating parent directories;
 * files and directories are given to `uid` (the sandbox's uid) when it is not null.
 */
export async function writeWorkspaceFile(
  workspace: string,
  relPath: string,
  data: string | Uint8Array,
  uid: number | null,
  programId: string,
): Promise<void> {
  const target = resolve(workspace, relPath);
  if (relPath === "" || !target.startsWith(workspace + sep)) {
    throw new ArborError(`sandbox ${programId}: writeFile path '${relPath}' must stay inside the workspace`, "sandbox");
  }
  const parts = target.slice(workspace.length + 1).split(sep);
  let dir = workspace;
  for (const part of parts.slice(0, -1)) {
    dir = join(dir, part);
    const st = await lstat(dir).catch(() => undefined);
    if (!st) {
      await mkdir(dir);
      if (uid !== null) await chown(dir, uid, uid);
    } else if (!st.isDirectory() || st.isSymbolicLink()) {
      throw new ArborError(`sandbox ${programId}: writeFile path '${relPath}': ${part} is not a directory`, "sandbox");
    }
  }
  const fh = await open(target, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW, 0o644).catch(
    (e: NodeJS.ErrnoException) => {
      throw new ArborError(`sandbox ${programId}: cannot write '${relPath}': ${e.code ?? e.message}`, "sandbox");
    },
  );
  try {
    await fh.writeFile(data);
    if (uid !== null) await fh.chown(uid, uid);
  } finally {
    await fh.close();
  }
}
