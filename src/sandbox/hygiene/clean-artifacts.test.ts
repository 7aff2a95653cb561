import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBwrapProvider, type BwrapProvider } from "../bwrap.js";
import { cleanWorkspace, planCleanup } from "./clean-artifacts.js";
import { diffSnapshots, snapshotWorkspace, type SnapshotEntry } from "./workspace-snapshot.js";

let root: string;
let provider: BwrapProvider;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "arbor-hygiene-clean-"));
  chmodSync(root, 0o755);
  provider = createBwrapProvider({ root, limits: { cpuSeconds: 10, memoryMb: 2048, wallMs: 20_000 } });
});

afterAll(async () => {
  await provider.destroyAll();
  rmSync(root, { recursive: true, force: true });
});

const entry = (path: string, type: SnapshotEntry["type"] = "file"): SnapshotEntry => ({ path, type, digest: type === "file" ? "x" : "" });

describe("post-setup artifact clean-up", () => {
  it("plans the topmost removals and spares allow-listed entries inside artifact trees", () => {
    const plan = planCleanup(
      [
        entry("a", "dir"),
        entry("a/.cache", "dir"),
        entry("a/.cache/x"),
        entry("a/.cache/y"),
        entry("a/.cache/keep.txt"),
        entry("b.orig"),
        entry("src", "dir"),
        entry("src/index.js"),
      ],
      { keep: ["a/.cache/keep.txt"] },
    );
    expect(plan).toEqual({ remove: ["a/.cache/x", "a/.cache/y", "b.orig"], kept: ["a/.cache/keep.txt"] });
  });

  it("removes planted artifacts inside a real sandbox, keeps allow-listed ones and records the diff", async () => {
    const sb = await provider.create("clean");
    const files: Record<string, string> = {
      "repo/src/index.js": "export const x = 1;\n",
      "repo/src/index.js.orig": "export const x = 2; // the fix, left by patch -b\n",
      "repo/npm-debug.log": "install log\n",
      "repo/node_modules/.cache/babel/a.json": "{}\n",
      "repo/node_modules/dep/index.js": "module.exports = 1;\n",
      "repo/test/fixtures/sample.orig": "a fixture the tests need\n",
      "repo/coverage/lcov.info": "TN:\n",
    };
    for (const [p, c] of Object.entries(files)) await sb.writeFile(p, c);
    const before = await snapshotWorkspace(sb);
    const report = await cleanWorkspace(sb, { keep: ["repo/test/fixtures/**"] });
    expect(report.removed).toEqual(["repo/coverage", "repo/node_modules/.cache", "repo/npm-debug.log", "repo/src/index.js.orig"]);
    expect(report.kept).toEqual(["repo/test/fixtures/sample.orig"]);
    expect(report.diff).toEqual({
      added: [],
      removed: [
        "repo/coverage",
        "repo/coverage/lcov.info",
        "repo/node_modules/.cache",
        "repo/node_modules/.cache/babel",
        "repo/node_modules/.cache/babel/a.json",
        "repo/npm-debug.log",
        "repo/src/index.js.orig",
      ],
      changed: [],
    });
    expect(report.entriesBefore).toBe(before.length);
    expect(report.entriesAfter).toBe(before.length - 7);
    const ws = sb.hostWorkspace;
    expect(existsSync(join(ws, "repo/src/index.js.orig"))).toBe(false);
    expect(readFileSync(join(ws, "repo/test/fixtures/sample.orig"), "utf8")).toBe(files["repo/test/fixtures/sample.orig"]);
    expect(readFileSync(join(ws, "repo/node_modules/dep/index.js"), "utf8")).toBe(files["repo/node_modules/dep/index.js"]);
    await sb.destroy();
  });

  it("snapshots hash contents and see changes, additions and removals", async () => {
    const sb = await provider.create("snap");
    await sb.writeFile("a.txt", "1");
    await sb.writeFile("b.txt", "2");
    const s1 = await snapshotWorkspace(sb);
    expect(s1.map((e) => [e.path, e.type])).toEqual([["a.txt", "file"], ["b.txt", "file"]]);
    await sb.exec(["/bin/sh", "-c", "echo changed > a.txt; rm b.txt; mkdir d; ln -s a.txt d/l"]);
    expect(diffSnapshots(s1, await snapshotWorkspace(sb))).toEqual({ added: ["d", "d/l"], removed: ["b.txt"], changed: ["a.txt"] });
    await sb.destroy();
  });
});
