// `npm run build` (and `prepare`, so `npm ci` and `npm pack` build too): compiles src/ to dist/ with
// declarations and source maps (tsconfig.build.json), copies the files modules read beside themselves (the
// SQLite writer thread's .mjs, swe-mini's task repos and vendored packages: everything under src/ that is not
// TypeScript, less src/testing/ and test fixtures), removes outputs whose source is gone, writes the chat
// templates' faster copy of @huggingface/jinja (scripts/lower-jinja.mjs), and last writes dist/.build-stamp
// with the time the build started, which bin/arbor.mjs compares with the sources' mtimes.
// The dashboard's web UI (web/dashboard/) is bundled by Vite into dist/dashboard/ (scripts/build-dashboard.mjs).
// Plain JavaScript so that it runs before anything is compiled.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { buildDashboard } from "./build-dashboard.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const src = join(root, "src");
const dist = join(root, "dist");
const stamp = join(dist, ".build-stamp");
const started = new Date();

let tsc;
try {
  tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
} catch {
  // A production install (`npm ci --omit=dev`) has no compiler: bin/arbor.mjs then runs the sources through tsx.
  console.error("arbor build: typescript is not installed (a production install?): dist/ not built; `arbor` runs the sources through tsx");
  process.exit(0);
}

// Without the stamp the last build did not finish (or dist/ was edited by hand): tsc's incremental state may
// name outputs that are missing, so start from scratch.
if (!existsSync(stamp)) rmSync(join(dist, ".tsbuildinfo"), { force: true });
const r = spawnSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], { stdio: "inherit" });
if (r.status !== 0) {
  rmSync(stamp, { force: true });
  process.exit(r.status ?? 1);
}

const assets = new Set();
copyAssets(src);
prune(dist);
// Generated, so written after the prune (which removes it with every output that has no source). Imported here,
// not above: esbuild is a development dependency, and a production install stops before (no compiler).
const { writeLoweredJinja } = await import("./lower-jinja.mjs");
writeLoweredJinja(join(dist, "model", "huggingface-jinja.js"));
try {
  await buildDashboard(join(dist, "dashboard"));
} catch (e) {
  rmSync(stamp, { force: true });
  console.error(`arbor build: the dashboard's web UI (web/dashboard/) did not build: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
}
writeFileSync(stamp, `${started.toISOString()}\n`);
utimesSync(stamp, started, started);

/** Copy every non-TypeScript file under dir to the same place under dist/ (not src/testing/ nor fixtures/). */
function copyAssets(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    if (e.isDirectory()) {
      if (path !== join(src, "testing") && e.name !== "fixtures") copyAssets(path);
    } else if (!e.name.endsWith(".ts")) {
      const rel = relative(src, path);
      mkdirSync(dirname(join(dist, rel)), { recursive: true });
      copyFileSync(path, join(dist, rel));
      assets.add(rel);
    }
  }
}

/** Remove compiled files and copies whose source no longer exists (a deleted or renamed module). */
function prune(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    const rel = relative(dist, path);
    // The web UI's bundle has no source under src/ (the dashboard build rewrites it).
    if (rel === "dashboard") continue;
    if (e.isDirectory()) {
      prune(path);
      if (readdirSync(path).length === 0) rmSync(path, { recursive: true });
    } else if (dir !== dist || !e.name.startsWith(".")) {
      const source = rel.replace(/(\.d)?\.(js|ts)(\.map)?$/, ".ts");
      if (!assets.has(rel) && !existsSync(join(src, source))) rmSync(path);
    }
  }
}
