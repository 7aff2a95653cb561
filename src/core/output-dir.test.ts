import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeOutputDir } from "./output-dir.js";

describe("makeOutputDir", () => {
  const dir = mkdtempSync(join(tmpdir(), "arbor-outdir-"));
  const file = join(dir, "a-file");
  writeFileSync(file, "x");

  it("creates the folder and its parents, and accepts one that exists", () => {
    makeOutputDir(join(dir, "a", "b"), "--out");
    expect(existsSync(join(dir, "a", "b"))).toBe(true);
    makeOutputDir(join(dir, "a", "b"), "--out");
  });

  it("names the field and the reason when a file is in the way, at the path or above it", () => {
    expect(() => makeOutputDir(file, "output.dir")).toThrow(`output.dir: cannot use ${file} as the output folder: it is a file, not a folder`);
    expect(() => makeOutputDir(join(file, "sub"), "--out")).toThrow(`--out: cannot use ${join(file, "sub")} as the output folder: a part of the path is a file, not a folder`);
  });
});
