// Pure edit application for the swe-mini edit tool: unified diffs (git/diff -u style, `a/` `b/`
// prefixes stripped) and search/replace blocks. Errors name the file and hunk that did not apply.

export interface FilePatch {
  /** Path relative to the repository (prefixes stripped); the new path for renames. */
  path: string;
  /** True when the patch creates the file (`--- /dev/null`). */
  create: boolean;
  /** True when the patch deletes the file (`+++ /dev/null`). */
  remove: boolean;
  hunks: Hunk[];
}

interface Hunk {
  oldStart: number;
  /** Lines of the hunk body: ' ' context, '-' removed, '+' added. */
  lines: { op: " " | "-" | "+"; text: string }[];
  /** The old (resp. new) side ends without a newline. */
  oldNoEol: boolean;
  newNoEol: boolean;
}

export class EditError extends Error {}

function stripPrefix(p: string): string {
  const path = p.split("\t")[0]?.trim() ?? "";
  return /^[ab]\//.test(path) ? path.slice(2) : path;
}

/** Parse a unified diff into per-file patches. */
export function parseUnifiedDiff(diff: string): FilePatch[] {
  const lines = diff.replace(/\r\n/g, "\n").split("\n");
  const files: FilePatch[] = [];
  let cur: FilePatch | undefined;
  let hunk: Hunk | undefined;
  let lastOp: " " | "-" | "+" | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    if (line.startsWith("--- ") && (lines[i + 1] ?? "").startsWith("+++ ")) {
      const oldPath = stripPrefix(line.slice(4));
      const newPath = stripPrefix((lines[i + 1] as string).slice(4));
      const create = oldPath === "/dev/null";
      const remove = newPath === "/dev/null";
      cur = { path: remove ? oldPath : newPath, create, remove, hunks: [] };
      files.push(cur);
      hunk = undefined;
      i++;
      continue;
    }
    const h = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(line);
    if (h) {
      if (!cur) throw new EditError(`hunk header before any '---'/'+++' file header: ${line}`);
      hunk = { oldStart: Number(h[1]), lines: [], oldNoEol: false, newNoEol: false };
      cur.hunks.push(hunk);
      continue;
    }
    if (!hunk) continue; // "diff --git", "index ..." and other preamble lines
    if (line.startsWith("\\")) {
      if (lastOp === "-" || lastOp === " ") hunk.oldNoEol = true;
      if (lastOp === "+" || lastOp === " ") hunk.newNoEol = true;
      continue;
    }
    const op = line[0];
    if (op === " " || op === "-" || op === "+") {
      hunk.lines.push({ op, text: line.slice(1) });
      lastOp = op;
    } else if (line === "") {
      // Some tools drop the single space of an empty context line.
      hunk.lines.push({ op: " ", text: "" });
      lastOp = " ";
    } else hunk = undefined;
  }
  if (files.length === 0) throw new EditError("no file headers ('--- a/path' / '+++ b/path') found in the diff");
  return files;
}

function splitLines(content: string): { lines: string[]; eol: boolean } {
  if (content === "") return { lines: [], eol: true };
  const eol = content.endsWith("\n");
  const lines = (eol ? content.slice(0, -1) : content).split("\n");
  return { lines, eol };
}

function matchesAt(lines: readonly string[], at: number, want: readonly string[]): boolean {
  if (at < 0 || at + want.length > lines.length) return false;
  return want.every((w, k) => lines[at + k] === w);
}

/** Apply one file's hunks to its content (undefined when the file does not exist). */
export function applyFilePatch(content: string | undefined, patch: FilePatch): string | undefined {
  if (patch.create && content !== undefined && content !== "") throw new EditError(`${patch.path}: patch creates the file but it already exists`);
  if (!patch.create && content === undefined) throw new EditError(`${patch.path}: file not found`);
  if (patch.remove) return undefined;
  const { lines, eol: hadEol } = splitLines(content ?? "");
  let eol = hadEol;
  let offset = 0;
  patch.hunks.forEach((h, hi) => {
    // The diff text's own final newline reads as an empty context line; drop it if it does not fit.
    let body = h.lines;
    let oldLines = body.filter((l) => l.op !== "+").map((l) => l.text);
    // "@@ -N,0" inserts after line N; any other hunk starts at line N.
    const want = Math.max(0, (oldLines.length === 0 ? h.oldStart : h.oldStart - 1) + offset);
    let at = findHunk(lines, oldLines, want);
    if (at < 0 && body.length > 0 && body[body.length - 1]?.op === " " && body[body.length - 1]?.text === "") {
      body = body.slice(0, -1);
      oldLines = body.filter((l) => l.op !== "+").map((l) => l.text);
      at = findHunk(lines, oldLines, want);
    }
    if (at < 0) {
      const first = oldLines.find((l) => l.trim() !== "") ?? "";
      throw new EditError(`${patch.path}: hunk ${hi + 1} (@@ -${h.oldStart}) does not apply: context not found (first line: ${JSON.stringify(first)})`);
    }
    const newLines = body.filter((l) => l.op !== "-").map((l) => l.text);
    const touchesEnd = at + oldLines.length === lines.length;
    lines.splice(at, oldLines.length, ...newLines);
    offset += newLines.length - oldLines.length;
    if (touchesEnd) eol = !h.newNoEol;
  });
  if (lines.length === 0) return "";
  return lines.join("\n") + (eol ? "\n" : "");
}

/** Position of `want` in `lines`, searching outward from `near`; -1 when absent. */
function findHunk(lines: readonly string[], want: readonly string[], near: number): number {
  if (want.length === 0) return Math.min(near, lines.length);
  for (let d = 0; d <= lines.length; d++) {
    if (matchesAt(lines, near - d, want)) return near - d;
    if (d > 0 && matchesAt(lines, near + d, want)) return near + d;
  }
  return -1;
}

/** One search/replace edit: the first exact occurrence of `search` becomes `replace`. */
export interface SearchReplace {
  search: string;
  replace: string;
}

const SR_BLOCK = /<<<<<<< SEARCH\n([\s\S]*?)\n?=======\n([\s\S]*?)\n?>>>>>>> REPLACE/g;

/** Parse `<<<<<<< SEARCH … ======= … >>>>>>> REPLACE` blocks. */
export function parseSearchReplace(text: string): SearchReplace[] {
  const blocks = [...text.replace(/\r\n/g, "\n").matchAll(SR_BLOCK)].map((m) => ({ search: m[1] as string, replace: m[2] as string }));
  if (blocks.length === 0) throw new EditError("no '<<<<<<< SEARCH' / '=======' / '>>>>>>> REPLACE' block found");
  return blocks;
}

/** Apply search/replace edits in order; each search text must occur exactly once. */
export function applySearchReplace(path: string, content: string, edits: readonly SearchReplace[]): string {
  let out = content;
  edits.forEach((e, i) => {
    if (e.search === "") throw new EditError(`${path}: edit ${i + 1} has an empty SEARCH text`);
    const first = out.indexOf(e.search);
    if (first < 0) throw new EditError(`${path}: edit ${i + 1}: SEARCH text not found`);
    if (out.indexOf(e.search, first + 1) >= 0) throw new EditError(`${path}: edit ${i + 1}: SEARCH text occurs more than once; include more context`);
    out = out.slice(0, first) + e.replace + out.slice(first + e.search.length);
  });
  return out;
}
