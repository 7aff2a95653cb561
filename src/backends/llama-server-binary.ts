// Where Arbor finds the llama-server binary it manages (weights/managed-llama-server.ts) and tests run:
// $ARBOR_LLAMA_SERVER, else the cache path scripts/build-llama-server.sh builds into, keyed by the
// llama.cpp source node-llama-cpp bundles (so a new node-llama-cpp means a new build, never a stale one).
import { createHash } from "node:crypto";
import { accessSync, constants, existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The llama-server binary, or why there is none. */
export type LlamaServerBinary = { path: string } | { missing: string };

/** The repository (package) root: src/backends/ and its build, dist/backends/, are two levels below it. */
const PACKAGE_ROOT = fileURLToPath(new URL("../..", import.meta.url));

/**
 * Find the llama-server binary: $ARBOR_LLAMA_SERVER, else the cache path scripts/build-llama-server.sh
 * builds into (${ARBOR_CACHE:-~/.cache/arbor}/llama-server/<bundle sha256[:16]>/llama-server).
 * @param repoRoot the package root holding node_modules/node-llama-cpp (default: this package's)
 * @param env where ARBOR_LLAMA_SERVER and ARBOR_CACHE are read (default: process.env)
 */
export function findLlamaServer(repoRoot: string = PACKAGE_ROOT, env: NodeJS.ProcessEnv = process.env): LlamaServerBinary {
  const explicit = env.ARBOR_LLAMA_SERVER;
  if (explicit) return isExecutable(explicit) ? { path: explicit } : { missing: `ARBOR_LLAMA_SERVER=${explicit} is not an executable file` };
  const bundle = join(repoRoot, "node_modules/node-llama-cpp/llama/gitRelease.bundle");
  if (!existsSync(bundle)) return { missing: `no llama.cpp source bundle at ${bundle}` };
  const sha = createHash("sha256").update(readFileSync(bundle)).digest("hex").slice(0, 16);
  const path = join(env.ARBOR_CACHE || join(homedir(), ".cache/arbor"), "llama-server", sha, "llama-server");
  return isExecutable(path) ? { path } : { missing: `no llama-server at ${path} (build it with scripts/build-llama-server.sh, or set ARBOR_LLAMA_SERVER)` };
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
