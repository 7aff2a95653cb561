// Creating a command's output folder, with an error a user can act on: the field or option that named the folder
// and why it cannot be one (a file is in the way, permission denied), instead of Node's bare EEXIST or ENOTDIR.
import { mkdirSync, statSync } from "node:fs";
import { ArborError } from "./errors.js";

/**
 * Create `dir` and its parents (nothing when it is a folder already), or throw ArborError "config" naming
 * `field` (e.g. "output.dir", "--out"). Commands call it before their work, so a bad path costs nothing.
 */
export function makeOutputDir(dir: string, field: string): void {
  try {
    mkdirSync(dir, { recursive: true });
    return;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    let why = e instanceof Error ? e.message : String(e);
    if (code === "EEXIST" && !isFolder(dir)) why = "it is a file, not a folder";
    else if (code === "ENOTDIR") why = "a part of the path is a file, not a folder";
    else if (code === "EACCES" || code === "EPERM" || code === "EROFS") why = `it cannot be created here (${code})`;
    throw new ArborError(`${field}: cannot use ${dir} as the output folder: ${why}`, "config");
  }
}

function isFolder(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
