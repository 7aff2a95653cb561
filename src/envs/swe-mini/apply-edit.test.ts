import { describe, expect, it } from "vitest";
import { applyFilePatch, applySearchReplace, EditError, parseSearchReplace, parseUnifiedDiff } from "./apply-edit.js";
import { buggyFiles } from "./swe-mini.js";
import { loadSweTasks } from "./task-data.js";

const FILE = ["a", "b", "c", "d", "e", "f", "g"].join("\n") + "\n";

describe("unified diffs", () => {
  it("apply hunks with context, at an offset, and across several files", () => {
    const diff = [
      "diff --git a/x.txt b/x.txt",
      "--- a/x.txt",
      "+++ b/x.txt",
      "@@ -2,3 +2,3 @@",
      " b",
      "-c",
      "+C",
      " d",
      "@@ -6,2 +6,3 @@",
      " f",
      " g",
      "+h",
      "--- /dev/null",
      "+++ b/new.txt",
      "@@ -0,0 +1,2 @@",
      "+hello",
      "+world",
    ].join("\n");
    const [x, n] = parseUnifiedDiff(diff);
    expect(applyFilePatch(FILE, x!)).toBe("a\nb\nC\nd\ne\nf\ng\nh\n");
    // Two extra lines on top: the hunks are found two lines further down.
    expect(applyFilePatch(`0\n1\n${FILE}`, x!)).toBe("0\n1\na\nb\nC\nd\ne\nf\ng\nh\n");
    expect(n).toMatchObject({ path: "new.txt", create: true });
    expect(applyFilePatch(undefined, n!)).toBe("hello\nworld\n");
  });

  it("handles missing final newlines and deletions, and names the hunk that does not apply", () => {
    const [p] = parseUnifiedDiff("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+B\n");
    expect(applyFilePatch("a\nb", p!)).toBe("a\nB\n");
    const [del] = parseUnifiedDiff("--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n");
    expect(applyFilePatch("a\n", del!)).toBeUndefined();
    const [bad] = parseUnifiedDiff("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-zzz\n+y\n");
    expect(() => applyFilePatch("a\nb\n", bad!)).toThrow(/f: hunk 1 \(@@ -1\) does not apply/);
    expect(() => applyFilePatch(undefined, bad!)).toThrow(/f: file not found/);
    expect(() => parseUnifiedDiff("just text")).toThrow(EditError);
  });

  it("every swe-mini golden patch turns the planted bug back into the upstream file", () => {
    for (const t of loadSweTasks()) {
      const buggy = buggyFiles(t);
      for (const p of parseUnifiedDiff(t.fixPatch)) {
        expect(buggy[p.path], t.id).not.toBe(t.files[p.path]);
        expect(applyFilePatch(buggy[p.path], p), t.id).toBe(t.files[p.path]);
      }
    }
  });
});

describe("search/replace edits", () => {
  it("replace a unique occurrence and refuse ambiguous or missing ones", () => {
    const blocks = parseSearchReplace("<<<<<<< SEARCH\nb\nc\n=======\nB\n>>>>>>> REPLACE\n<<<<<<< SEARCH\ng\n=======\nG\n>>>>>>> REPLACE");
    expect(blocks).toEqual([{ search: "b\nc", replace: "B" }, { search: "g", replace: "G" }]);
    expect(applySearchReplace("f", FILE, blocks)).toBe("a\nB\nd\ne\nf\nG\n");
    expect(() => applySearchReplace("f", "x x", [{ search: "x", replace: "y" }])).toThrow(/occurs more than once/);
    expect(() => applySearchReplace("f", "x", [{ search: "q", replace: "y" }])).toThrow(/SEARCH text not found/);
    expect(() => parseSearchReplace("nothing")).toThrow(/no '<<<<<<< SEARCH'/);
  });
});
