#!/usr/bin/env node
// Entry point of the `arbor` command. It runs the compiled JavaScript in dist/ (`npm run build`; `npm ci` builds
// it through the `prepare` script) when dist/ is at least as new as the sources, and otherwise the TypeScript
// sources in src/ through tsx's loader, so a developer who edits src/ and runs `arbor` (or a test that spawns
// it) never runs stale JavaScript. Why both: starting from dist/ skips compiling modules at each start (tests
// spawn `arbor` hundreds of times; `arbor --help` took 8-13 s through tsx, 0.35 s from dist/ on a loaded 2-core
// machine); the fallback is slower but always the code on disk, and the check costs one stat per source file
// (~40 ms for ~630 files there). `npm test` builds before running the tests, so they spawn dist/; a build is
// not started from here, because concurrent `arbor` processes would rewrite dist/ under each other.
// An installed package ships dist/ and no src/, so it always runs dist/. The dashboard's web UI (web/dashboard/,
// bundled by the build into dist/dashboard/) counts as a source too: edited after the build, dist/ is stale. The
// sources then run, but the dashboard still serves the last bundle (nothing builds it here), which a run or
// `serve dashboard` that serves it says on stderr.
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const src = join(root, "src");
const web = join(root, "web", "dashboard");
// Written by scripts/build.mjs with the time the build started: a source saved during a build counts as newer.
const stamp = join(root, "dist", ".build-stamp");

// ARBOR_FROM_SOURCE=1 forces the sources (e.g. to compare both); otherwise dist/ wherever it is fresh.
if (process.env.ARBOR_FROM_SOURCE !== "1" && (!existsSync(src) || distIsFresh())) {
  await import("../dist/cli/main.js");
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../src/cli/main.ts");
}

/** True when the build stamp exists and no file that dist/ is built from is newer (an mtime walk: a few ms). */
function distIsFresh() {
  let built;
  try {
    built = statSync(stamp).mtimeMs;
  } catch {
    return false;
  }
  const webNewer = existsSync(web) && newestSource(web) > built;
  if (webNewer && process.argv.slice(2).some((a) => a === "dashboard" || a === "--dashboard")) {
    console.error("arbor: web/dashboard/ changed since the last build; the dashboard serves dist/dashboard/ from that build until `npm run build`");
  }
  return !webNewer && newestSource(src) <= built;
}

/** Newest mtime of the files under dir that the build reads (tests and src/testing are not built). */
function newestSource(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    if (e.isDirectory()) {
      if (path !== join(src, "testing")) newest = Math.max(newest, newestSource(path));
    } else if (!/\.(test|contract)\.ts$/.test(e.name)) {
      newest = Math.max(newest, statSync(path).mtimeMs);
    }
  }
  return newest;
}
