import { describe, expect, it } from "vitest";
import { parseStrace, unescapeStrace } from "./strace-parse.js";

// Lines as strace 6 prints them under -f -y -s 4096 -e trace=%file.
const TRACE = [
  '6     execve("/usr/bin/cat", ["cat", "/workspace/a.txt"], 0x7ffc /* 5 vars */) = 0',
  '6     openat(AT_FDCWD</workspace/repo>, "src/index.js", O_RDONLY) = 3</workspace/repo/src/index.js>',
  '7     openat(AT_FDCWD</workspace/repo>, "../.grader/t.mjs", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)',
  '7     newfstatat(AT_FDCWD</workspace>, ".grader", {st_mode=S_IFDIR|0755, ...}, 0) = 0',
  '8     openat(3</workspace/repo/test>, "basic.test.mjs", O_WRONLY|O_CREAT|O_TRUNC, 0666 <unfinished ...>',
  "8     <... openat resumed>) = 4</workspace/repo/test/basic.test.mjs>",
  '9     renameat2(AT_FDCWD</workspace>, "a", AT_FDCWD</workspace>, "b c", RENAME_NOREPLACE) = 0',
  '9     symlinkat(".grader", AT_FDCWD</workspace/repo>, "g") = 0',
  '9     unlink("rel\\"q.txt") = 0',
  "9     +++ exited with 0 +++",
  "--- SIGCHLD {si_signo=SIGCHLD} ---",
].join("\n");

describe("strace parsing", () => {
  it("turns %file syscalls into absolute read/write accesses, failed attempts included", () => {
    const acc = parseStrace(TRACE, "/workspace/repo");
    expect(acc.map((a) => [a.pid, a.syscall, a.mode, a.path])).toEqual([
      [6, "execve", "read", "/usr/bin/cat"],
      [6, "openat", "read", "/workspace/repo/src/index.js"],
      [7, "openat", "read", "/workspace/.grader/t.mjs"],
      [8, "openat", "write", "/workspace/repo/test/basic.test.mjs"],
      [9, "renameat2", "write", "/workspace/a"],
      [9, "renameat2", "write", "/workspace/b c"],
      [9, "symlinkat", "write", "/workspace/repo/.grader"],
      [9, "symlinkat", "write", "/workspace/repo/g"],
      [9, "unlink", "write", '/workspace/repo/rel"q.txt'],
    ]);
  });

  it("decodes C escapes", () => {
    expect(unescapeStrace('a\\"b\\\\c\\n\\x41\\101')).toBe('a"b\\c\nAA');
    expect(unescapeStrace("caf\\303\\251")).toBe("café");
  });
});
