// The npm package as a user gets it: `npm pack` (its `prepare` builds dist/), installed in another folder,
// imported by name with its types, and its `arbor` command run. Slow (a full build and one install), so it
// is one test.
//
// The pack runs in a copy of the repository, so that rebuilding dist/ never rewrites files other tests are
// running. The install is offline, from npm's cache: `npm install <tgz>` alone would need the registry's
// package documents to resolve the dependencies' ranges, which `npm ci` does not cache; so the consumer gets a
// lockfile made from this repository's (the same versions `npm ci` put in the cache) and runs `npm ci`.
// Install scripts are off: better-sqlite3's would compile or download its binding, which importing Arbor
// does not load.
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it, onTestFinished } from "vitest";
import { repoRoot } from "../testing/validate-cli.js";

const run = promisify(execFile);
const npm = "npm";
const manifest = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { name: string; version: string; dependencies: Record<string, string>; bin: Record<string, string>; engines: Record<string, string> };

// What `import … from "arbor-rl"` gives: src/index.ts, documented in README.md "Use as a library".
const PUBLIC_VALUES = ["ArborError", "PROGRAM_HEADER", "createBackend", "createGateway", "createSandboxProvider", "createStore", "defineAgent", "defineTool", "loadRunConfig", "openStore", "parseRunConfig", "realClock"];

// Folders of the repository the pack does not need (the build makes dist/ anew).
const NOT_COPIED = new Set(["node_modules", ".git", "dist", ".arbor", "coverage", "__pycache__"]);

interface PackEntry {
  filename: string;
  files: { path: string }[];
}

/** A lockfile for `consumer`, which depends on the tarball: the tarball's entry, then this repository's locked production packages. */
function consumerLock(tarball: string): unknown {
  const lock = JSON.parse(readFileSync(join(repoRoot, "package-lock.json"), "utf8")) as { packages: Record<string, { dev?: boolean }> };
  const packages: Record<string, unknown> = {
    "": { name: "consumer", dependencies: { [manifest.name]: `file:${tarball}` } },
    [`node_modules/${manifest.name}`]: { version: manifest.version, resolved: `file:${tarball}`, dependencies: manifest.dependencies, bin: manifest.bin, engines: manifest.engines },
  };
  for (const [path, entry] of Object.entries(lock.packages)) if (path !== "" && entry.dev !== true) packages[path] = entry;
  return { name: "consumer", lockfileVersion: 3, requires: true, packages };
}

describe("the npm package", () => {
  it("packs with dist/ and without tests, installs elsewhere, imports by name with types, and runs `arbor --version`", { timeout: 900_000 }, async () => {
    const work = mkdtempSync(join(tmpdir(), "arbor-pack-"));
    // The consumer's node_modules is hundreds of MB.
    onTestFinished(() => rmSync(work, { recursive: true, force: true }));
    const stage = join(work, "repo");
    cpSync(repoRoot, stage, { recursive: true, filter: (src) => !NOT_COPIED.has(relative(repoRoot, src).split("/").pop() ?? "") });
    symlinkSync(join(repoRoot, "node_modules"), join(stage, "node_modules"));

    const packed = await run(npm, ["pack", "--json", "--pack-destination", work], { cwd: stage, maxBuffer: 64 << 20, timeout: 600_000 });
    // `prepare` prints the build's output before npm's JSON.
    const [entry] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf("["))) as PackEntry[];
    const files = entry?.files.map((f) => f.path) ?? [];
    for (const f of ["package.json", "README.md", "bin/arbor.mjs", "dist/index.js", "dist/index.d.ts", "dist/cli/main.js", "dist/store/sqlite-writer.mjs", "dist/dashboard/index.html", "models/calc-sft.gguf", "models/calc-solver.gguf", "examples/quickstart.yaml", "python/arbor_client/client.py"]) {
      expect(files, f).toContain(f);
    }
    expect(files.some((f) => f.startsWith("dist/envs/swe-mini/tasks/"))).toBe(true);
    // Arbor's own tests stay out (the environments' task repositories carry tests of their own: data, .mjs).
    expect(files.filter((f) => /\.(test|contract)\.(ts|js|d\.ts|js\.map)$|^src\/|^dist\/testing\/|\.tsbuildinfo$|__pycache__/.test(f))).toEqual([]);

    const consumer = join(work, "consumer");
    mkdirSync(consumer);
    const tarball = `../${entry?.filename ?? ""}`;
    writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module", dependencies: { [manifest.name]: `file:${tarball}` } }));
    writeFileSync(join(consumer, "package-lock.json"), JSON.stringify(consumerLock(tarball)));
    await run(npm, ["ci", "--offline", "--ignore-scripts", "--omit=optional", "--no-audit", "--no-fund"], { cwd: consumer, maxBuffer: 64 << 20, timeout: 600_000 });

    const imported = await run(process.execPath, ["--input-type=module", "-e", `import("${manifest.name}").then((m) => console.log(JSON.stringify(Object.keys(m).sort())))`], { cwd: consumer });
    expect(JSON.parse(imported.stdout)).toEqual(PUBLIC_VALUES);

    // The types: a consumer's TypeScript sees the API (skipLibCheck, as `tsc --init` sets it).
    writeFileSync(
      join(consumer, "use.ts"),
      [
        `import { defineAgent, defineTool, parseRunConfig, type RunConfig, type TrajectoryStore } from "${manifest.name}";`,
        "const cfg: RunConfig = parseRunConfig({});",
        "const store: TrajectoryStore | undefined = undefined;",
        "// @ts-expect-error: not part of the public API",
        `import type { SqliteTrajectoryStore } from "${manifest.name}";`,
        "export const used = [defineAgent, defineTool, cfg.seed, store];",
        "",
      ].join("\n"),
    );
    // README.md's example compiles against the installed package (its free variables declared).
    const readme = readFileSync(join(repoRoot, "README.md"), "utf8");
    const example = /## Use as a library\n[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(example).toBeDefined();
    writeFileSync(join(consumer, "readme-example.ts"), `declare const gateway: string, programId: string, programKey: string;\n${example ?? ""}export {};\n`);
    writeFileSync(join(consumer, "tsconfig.json"), JSON.stringify({ compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: true, skipLibCheck: true, types: [] }, files: ["use.ts", "readme-example.ts"] }));
    await run(process.execPath, [join(repoRoot, "node_modules/typescript/bin/tsc"), "-p", consumer], { cwd: consumer, timeout: 300_000 });

    const version = await run(join(consumer, "node_modules/.bin/arbor"), ["--version"], { cwd: consumer });
    expect(version.stdout.trim()).toBe(manifest.version);
  });
});
