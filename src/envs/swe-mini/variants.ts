// swe-mini variants (environment variables, configuration, the version of the pre-installed dev
// dependency) and perturbations (that dependency removed; a package registry that never answers).
import { join } from "node:path";
import type { EnvVariant } from "../variants.js";
import { readTree, VENDOR_DIR } from "./task-data.js";

/** Pre-installed dev dependency versions, repo-relative path → content. */
export function vendorFiles(version: 1 | 2): Record<string, string> {
  const tree = readTree(join(VENDOR_DIR, `mini-expect-${version}`));
  return Object.fromEntries(Object.entries(tree).map(([p, c]) => [`repo/node_modules/mini-expect/${p}`, c]));
}

// A port nothing listens on: connections are refused at once (the sandbox has no network anyway).
const DEAD_REGISTRY = "http://127.0.0.1:9/";

/** The declared variants and perturbations. */
export function sweVariants(): EnvVariant[] {
  return [
    { id: "baseline", kind: "variant", description: "mini-expect 1.4.2, default environment", weight: 2 },
    { id: "mini-expect-2", kind: "variant", description: "dev dependency mini-expect 2.0.1 instead of 1.4.2", files: vendorFiles(2) },
    { id: "tz-new-york", kind: "variant", description: "TZ=America/New_York", env: { TZ: "America/New_York" } },
    { id: "lang-c", kind: "variant", description: "C locale (LANG=C, LC_ALL=C)", env: { LANG: "C", LC_ALL: "C" } },
    {
      id: "npm-mirror",
      kind: "variant",
      description: "npm configured for a registry mirror",
      env: { npm_config_registry: "https://registry.npmmirror.com/" },
      files: { "repo/.npmrc": "registry=https://registry.npmmirror.com/\n" },
    },
    {
      id: "registry-unreachable",
      kind: "perturbation",
      description: "package registry points at a closed local port",
      env: { npm_config_registry: DEAD_REGISTRY },
      files: { "repo/.npmrc": `registry=${DEAD_REGISTRY}\n` },
      weight: 0.5,
    },
    {
      id: "dev-dependency-removed",
      kind: "perturbation",
      description: "pre-installed dev dependency mini-expect removed",
      remove: ["repo/node_modules/mini-expect"],
      weight: 0.5,
    },
  ];
}
