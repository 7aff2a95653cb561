// One name (a run id, a batch id, a package name) as a single file or folder name on any file system.

/** `name` with every character other than letters, digits, `.`, `_` and `-` replaced by `_`. */
export function fileSafeName(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]/g, "_");
}
