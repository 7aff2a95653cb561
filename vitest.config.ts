import { defineConfig } from "vitest/config";

// Files that set process-global state (the OpenAI Agents SDK's default client) run in a fresh module
// graph each; every other file shares its worker's module cache with the files before it (no re-import
// of the stack per file: the suite's import time falls several-fold).
const ISOLATED = ["src/gateway/surfaces/responses-engine.test.ts", "src/gateway/surfaces/tools-sdk.test.ts"];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: llama.cpp contexts and bwrap sandboxes are heavy, so keep parallel files bounded.
    maxWorkers: 2,
    pool: "forks",
    reporters: ["default", "./scripts/summary-reporter.ts"],
    projects: [
      { extends: true, test: { name: "isolated", include: ISOLATED } },
      { extends: true, test: { name: "shared", include: ["src/**/*.test.ts"], exclude: ISOLATED, isolate: false } },
    ],
  },
});
