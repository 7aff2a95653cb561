// Loads a user's module named in a run config (`env.module: ./my-env.ts`, `reward.custom: ./my-reward.ts#score`)
// and returns one of its exports. TypeScript modules go through tsx's `tsImport` (tsx is a runtime dependency),
// so they load the same whether `arbor` runs from src/ through tsx or from the compiled dist/ of an installed
// package; JavaScript modules (.js, .mjs, .cjs) are plain dynamic imports and need nothing else.
import { existsSync, statSync } from "node:fs";
import { extname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { ArborError } from "./errors.js";

/** A module path with the export to take: `path` or `path#name` (no `#`: the default export). */
export interface ModuleSpec {
  path: string;
  /** The export's name; "default" when the spec names none. */
  exportName: string;
}

const TS_EXTENSIONS = new Set([".ts", ".mts", ".cts"]);
const JS_EXTENSIONS = new Set([".js", ".mjs", ".cjs"]);

/** Split `path#name` into the path and the export (default when absent). */
export function parseModuleSpec(spec: string): ModuleSpec {
  const hash = spec.lastIndexOf("#");
  if (hash < 0) return { path: spec, exportName: "default" };
  const exportName = spec.slice(hash + 1);
  return { path: spec.slice(0, hash), exportName: exportName === "" ? "default" : exportName };
}

/**
 * Import the module of `spec` and return the export it names. `field` names the config field in errors
 * (e.g. "env.module"). Throws an {@link ArborError} for a missing file, an unsupported extension, a module
 * that fails to load (its own error in one line) and a missing export (naming the exports there are).
 */
export async function loadModuleExport(spec: string, field: string): Promise<unknown> {
  const { path, exportName } = parseModuleSpec(spec);
  const abs = resolve(path);
  if (!existsSync(abs)) throw new ArborError(`${field}: module ${path} not found${path === abs ? "" : ` (${abs})`}`, "config");
  if (!statSync(abs).isFile()) throw new ArborError(`${field}: ${path} is not a file`, "config");
  const ext = extname(abs);
  if (!TS_EXTENSIONS.has(ext) && !JS_EXTENSIONS.has(ext)) {
    throw new ArborError(`${field}: ${path}: unsupported extension '${ext}' (use .ts, .mts, .js or .mjs)`, "config");
  }
  let mod: Record<string, unknown>;
  try {
    const url = pathToFileURL(abs).href;
    if (TS_EXTENSIONS.has(ext)) {
      // Imported on first use: only runs that load a TypeScript module pay for tsx's loader.
      const { tsImport } = await import("tsx/esm/api");
      mod = (await tsImport(url, import.meta.url)) as Record<string, unknown>;
    } else {
      mod = (await import(url)) as Record<string, unknown>;
    }
  } catch (e) {
    const msg = (e instanceof Error ? e.message : String(e)).split("\n")[0];
    throw new ArborError(`${field}: cannot load ${path}: ${msg}`, "config");
  }
  const ns = namespaceOf(mod);
  const value = Object.hasOwn(ns, exportName) ? ns[exportName] : commonJsExport(ns, exportName);
  if (value === undefined) {
    const names = Object.keys(ns).filter((k) => k !== "__esModule" && k !== "module.exports").sort();
    throw new ArborError(`${field}: ${path} has no export '${exportName}' (exports: ${names.length > 0 ? names.join(", ") : "none"})`, "config");
  }
  return value;
}

/**
 * The module's exports as its author wrote them. A TypeScript file outside a `"type": "module"` package is
 * compiled as CommonJS, and Node's import then gives its whole `exports` object (marked `__esModule`) as `default`.
 */
function namespaceOf(mod: Record<string, unknown>): Record<string, unknown> {
  const d = mod.default;
  return typeof d === "object" && d !== null && (d as { __esModule?: unknown }).__esModule === true ? (d as Record<string, unknown>) : mod;
}

/** A plain CommonJS module's `module.exports` is the namespace's `default`: its members are the exports. */
function commonJsExport(mod: Record<string, unknown>, name: string): unknown {
  const d = mod.default;
  if (name === "default" || typeof d !== "object" || d === null || !Object.hasOwn(d, name)) return undefined;
  return (d as Record<string, unknown>)[name];
}
