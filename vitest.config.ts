import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: llama.cpp contexts and bwrap sandboxes are heavy, so keep parallel files bounded.
    maxWorkers: 2,
    pool: "forks",
    reporters: ["default", "./scripts/summary-reporter.ts"],
  },
});
