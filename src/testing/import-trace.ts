// Test support: which modules a Node.js process loads. A module-resolution hook (node:module `register`,
// given to the child with --import) appends every resolved URL to a file, so a test can check that a
// command did not load a heavy package (`arbor --help` must not load tfjs or llama.cpp).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { onTestFinished } from "vitest";

// The hook runs on Node's loader thread; it only records and passes every resolution on unchanged.
const HOOKS = `import { appendFileSync } from "node:fs";
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(process.env.ARBOR_IMPORT_TRACE, r.url + "\\n");
  return r;
}
`;

/** An import trace: the node arguments and environment that record into it, and the URLs recorded so far. */
export interface ImportTrace {
  /** Put before the script: `node ...nodeArgs script args`. */
  nodeArgs: string[];
  env: Record<string, string>;
  /** Every module URL the child resolved (ESM imports; CommonJS requires inside packages are not seen). */
  urls(): string[];
}

/** A fresh trace in its own temporary folder, removed when the calling test finishes. */
export function importTrace(): ImportTrace {
  const dir = mkdtempSync(join(tmpdir(), "arbor-import-trace-"));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  const hooks = join(dir, "hooks.mjs");
  const register = join(dir, "register.mjs");
  const out = join(dir, "trace.txt");
  writeFileSync(hooks, HOOKS);
  writeFileSync(register, `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
  writeFileSync(out, "");
  return {
    nodeArgs: ["--import", pathToFileURL(register).href],
    env: { ARBOR_IMPORT_TRACE: out },
    urls: () => readFileSync(out, "utf8").split("\n").filter((l) => l !== ""),
  };
}
