// Parses `strace -f -y -e trace=%file` output into file accesses (absolute paths, read or write),
// the raw material of the hygiene monitor. Failed attempts count: trying to open a grader file
// that is not there yet is still an attempt.
import { posix } from "node:path";

export type AccessMode = "read" | "write";

/** One path a traced process touched. */
export interface FileAccess {
  pid: number;
  syscall: string;
  /** Absolute, normalised path (as the process named it; symlinks are not resolved). */
  path: string;
  mode: AccessMode;
}

type PathArg = { path: number; dirfd?: number };
interface SyscallShape {
  args: PathArg[];
  /** "open": read or write depending on the flags argument. */
  mode: AccessMode | "open";
  flagsArg?: number;
}

const P = (path: number, dirfd?: number): PathArg => (dirfd === undefined ? { path } : { path, dirfd });

// Metadata-only calls (stat, access, readlink, chdir, getcwd) are left out on purpose: `ls -l`
// of the workspace must not count as reading what it lists.
const SHAPES: Record<string, SyscallShape> = {
  open: { args: [P(0)], mode: "open", flagsArg: 1 },
  openat: { args: [P(1, 0)], mode: "open", flagsArg: 2 },
  openat2: { args: [P(1, 0)], mode: "open", flagsArg: 2 },
  creat: { args: [P(0)], mode: "write" },
  execve: { args: [P(0)], mode: "read" },
  execveat: { args: [P(1, 0)], mode: "read" },
  truncate: { args: [P(0)], mode: "write" },
  unlink: { args: [P(0)], mode: "write" },
  unlinkat: { args: [P(1, 0)], mode: "write" },
  rmdir: { args: [P(0)], mode: "write" },
  mkdir: { args: [P(0)], mode: "write" },
  mkdirat: { args: [P(1, 0)], mode: "write" },
  rename: { args: [P(0), P(1)], mode: "write" },
  renameat: { args: [P(1, 0), P(3, 2)], mode: "write" },
  renameat2: { args: [P(1, 0), P(3, 2)], mode: "write" },
  link: { args: [P(0), P(1)], mode: "write" },
  linkat: { args: [P(1, 0), P(3, 2)], mode: "write" },
  // A symlink's target is resolved against the link's directory (below).
  symlink: { args: [P(0), P(1)], mode: "write" },
  symlinkat: { args: [P(0), P(2, 1)], mode: "write" },
  chmod: { args: [P(0)], mode: "write" },
  fchmodat: { args: [P(1, 0)], mode: "write" },
  chown: { args: [P(0)], mode: "write" },
  lchown: { args: [P(0)], mode: "write" },
  fchownat: { args: [P(1, 0)], mode: "write" },
  mknod: { args: [P(0)], mode: "write" },
  mknodat: { args: [P(1, 0)], mode: "write" },
};

const WRITE_FLAGS = /\b(?:O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|O_APPEND)\b/;
const LINE = /^(?:\[pid\s+)?(\d+)\]?\s+([a-z0-9_]+)\((.*)$/;

/** Split the argument text of one syscall at top-level commas (outside quotes, brackets, <>). */
function splitArgs(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = "";
  let inStr = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i] as string;
    if (inStr) {
      cur += ch;
      if (ch === "\\") cur += text[++i] ?? "";
      else if (ch === '"') inStr = false;
      continue;
    }
    if (ch === '"') inStr = true;
    else if (ch === "(" || ch === "[" || ch === "{" || ch === "<") depth++;
    else if (ch === ")" || ch === "]" || ch === "}" || ch === ">") {
      if (depth === 0) {
        out.push(cur.trim());
        return out;
      }
      depth--;
    } else if (ch === "," && depth === 0) {
      out.push(cur.trim());
      cur = "";
      continue;
    }
    cur += ch;
  }
  if (cur.trim()) out.push(cur.trim().replace(/\s*<unfinished \.\.\.>$/, ""));
  return out;
}

/** Decode strace's C-style string escapes (\" \\ \n \t \xHH \ooo). */
export function unescapeStrace(s: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const ch = s[i] as string;
    if (ch !== "\\") {
      bytes.push(...Buffer.from(ch, "utf8"));
      continue;
    }
    const n = s[++i] ?? "";
    const simple: Record<string, number> = { n: 10, t: 9, r: 13, v: 11, f: 12, '"': 34, "\\": 92 };
    if (n in simple) bytes.push(simple[n] as number);
    else if (n === "x") {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else if (/[0-7]/.test(n)) {
      const oct = /^[0-7]{1,3}/.exec(s.slice(i))?.[0] ?? n;
      bytes.push(parseInt(oct, 8));
      i += oct.length - 1;
    } else bytes.push(...Buffer.from(n, "utf8"));
  }
  return Buffer.from(bytes).toString("utf8");
}

function quoted(arg: string | undefined): string | undefined {
  const m = arg === undefined ? null : /^"((?:[^"\\]|\\.)*)"/.exec(arg);
  return m ? unescapeStrace(m[1] as string) : undefined;
}

/** The directory a `-y` decorated fd argument names: `AT_FDCWD</dir>` or `3</dir>`. */
function fdDir(arg: string | undefined): string | undefined {
  const m = arg === undefined ? null : /^(?:AT_FDCWD|-?\d+)<(.*)>$/.exec(arg);
  return m ? unescapeStrace(m[1] as string) : undefined;
}

/**
 * Parse strace output. `cwd` resolves relative paths of calls that carry no directory fd (open,
 * unlink, ...); the *at variants name their directory themselves under `-y`.
 */
export function parseStrace(text: string, cwd: string): FileAccess[] {
  const out: FileAccess[] = [];
  // A truncated trace file reads back as NULs up to strace's write offset: skip them.
  for (const line of text.replace(/\0+/g, "").split("\n")) {
    const m = LINE.exec(line);
    if (!m) continue;
    const syscall = m[2] as string;
    const shape = SHAPES[syscall];
    if (!shape) continue;
    const args = splitArgs(m[3] as string);
    let mode: AccessMode = shape.mode === "open" ? "read" : shape.mode;
    if (shape.mode === "open" && WRITE_FLAGS.test(args[shape.flagsArg ?? -1] ?? "")) mode = "write";
    const resolved: string[] = [];
    for (const a of shape.args) {
      const p = quoted(args[a.path]);
      if (p === undefined) continue;
      const base = (a.dirfd !== undefined ? fdDir(args[a.dirfd]) : undefined) ?? cwd;
      resolved.push(posix.resolve(base, p));
    }
    if ((syscall === "symlink" || syscall === "symlinkat") && resolved.length === 2) {
      const target = quoted(args[0]) as string;
      resolved[0] = posix.resolve(posix.dirname(resolved[1] as string), target);
    }
    for (const path of resolved) out.push({ pid: Number(m[1]), syscall, path, mode });
  }
  return out;
}
