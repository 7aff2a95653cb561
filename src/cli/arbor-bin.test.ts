// bin/arbor.mjs picks what it runs: dist/ when its build stamp is at least as new as every source it is built
// from (src/ and the dashboard's web/dashboard/), the sources through tsx otherwise (never stale JavaScript), dist/ alone in an installed package.
// Checked on a copy of bin/ in a folder with a stand-in src/cli/main.ts and dist/cli/main.js, mtimes set by hand.
import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { beforeEach, describe, expect, it, onTestFinished } from "vitest";
import { repoRoot } from "../testing/validate-cli.js";

const run = promisify(execFile);
let pkg: string;

/** Write a file of the stand-in package with the given mtime (seconds since the epoch). */
function file(rel: string, text: string, mtimeS: number): void {
  const path = join(pkg, rel);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
  utimesSync(path, mtimeS, mtimeS);
}

/** What the stand-in's `arbor` ran: "dist" or "src". */
async function ran(env: Record<string, string> = {}): Promise<string> {
  return (await runWith([], env)).stdout;
}

/** The stand-in's `arbor` with `args`: what it ran (stdout) and what it said on stderr. */
async function runWith(args: string[], env: Record<string, string> = {}): Promise<{ stdout: string; stderr: string }> {
  const r = await run(process.execPath, [join(pkg, "bin/arbor.mjs"), ...args], { env: { ...process.env, ARBOR_FROM_SOURCE: "0", ...env } });
  return { stdout: r.stdout.trim(), stderr: r.stderr.trim() };
}

beforeEach(() => {
  pkg = mkdtempSync(join(tmpdir(), "arbor-bin-"));
  onTestFinished(() => rmSync(pkg, { recursive: true, force: true }));
  mkdirSync(join(pkg, "bin"));
  copyFileSync(join(repoRoot, "bin/arbor.mjs"), join(pkg, "bin/arbor.mjs"));
  writeFileSync(join(pkg, "package.json"), JSON.stringify({ type: "module" }));
  // tsx, for the sources.
  symlinkSync(join(repoRoot, "node_modules"), join(pkg, "node_modules"));
  file("src/cli/main.ts", 'const from: string = "src";\nconsole.log(from);\n', 1_000);
  file("src/core/errors.ts", "export {};\n", 1_500);
  file("dist/cli/main.js", 'console.log("dist");\n', 2_000);
  file("dist/.build-stamp", "", 2_000);
});

describe("bin/arbor.mjs", () => {
  it("runs dist/ when the stamp is as new as every built source", async () => {
    expect(await ran()).toBe("dist");
    utimesSync(join(pkg, "src/core/errors.ts"), 2_000, 2_000);
    expect(await ran()).toBe("dist");
  });

  it("runs the sources when any built source is newer than the stamp, or there is no stamp", async () => {
    utimesSync(join(pkg, "src/core/errors.ts"), 2_001, 2_001);
    expect(await ran()).toBe("src");
    file("src/envs/swe-mini/tasks/t/repo/index.js", "", 3_000);
    utimesSync(join(pkg, "src/core/errors.ts"), 1_500, 1_500);
    expect(await ran()).toBe("src");
    rmSync(join(pkg, "src/envs"), { recursive: true });
    expect(await ran()).toBe("dist");
    rmSync(join(pkg, "dist/.build-stamp"));
    expect(await ran()).toBe("src");
  });

  it("ignores what the build leaves out: tests, contract suites, src/testing/", async () => {
    file("src/core/errors.test.ts", "", 3_000);
    file("src/core/store.contract.ts", "", 3_000);
    file("src/testing/helper.ts", "", 3_000);
    expect(await ran()).toBe("dist");
  });

  it("counts the dashboard's web UI (web/dashboard/, bundled into dist/dashboard/) as a source, and says so where the dashboard is served", async () => {
    file("web/dashboard/main.ts", "", 1_800);
    expect(await ran()).toBe("dist");
    utimesSync(join(pkg, "web/dashboard/main.ts"), 2_500, 2_500);
    expect(await ran()).toBe("src");
    const NOTE = "arbor: web/dashboard/ changed since the last build; the dashboard serves dist/dashboard/ from that build until `npm run build`";
    expect(await runWith(["run", "x.yaml", "--dashboard"])).toEqual({ stdout: "src", stderr: NOTE });
    expect(await runWith(["serve", "dashboard"])).toEqual({ stdout: "src", stderr: NOTE });
    expect((await runWith(["inspect", "s.sqlite"])).stderr).toBe("");
  });

  it("ARBOR_FROM_SOURCE=1 runs the sources; without src/ (an installed package) dist/ runs", async () => {
    expect(await ran({ ARBOR_FROM_SOURCE: "1" })).toBe("src");
    rmSync(join(pkg, "src"), { recursive: true });
    rmSync(join(pkg, "dist/.build-stamp"));
    expect(await ran()).toBe("dist");
  });
});
