// A run whose every program the infrastructure fails stops with an error naming the cause, rather than training on
// nothing and exiting 0 with a normal summary: here the Docker sandbox provider with DOCKER_HOST naming a socket
// that does not exist, so no program's sandbox starts (each ends sandbox_error, recorded in the store).
import { chmodSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseRunConfig } from "../core/config.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { runIteration } from "./run.js";

describe("a run whose programs the infrastructure failed, every one", () => {
  it("stops at that iteration with rollout_failed, naming the kind, the count and the first program's cause; the programs are recorded", async () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-infra-fail-"));
    chmodSync(dir, 0o755);
    const cfg = parseRunConfig(smallRlConfig(dir, "infra", { engines: [{ name: "e0", sequences: 4, contextSize: 1024 }], iterations: 2, sandbox: { provider: "docker" } }));
    const before = process.env.DOCKER_HOST;
    process.env.DOCKER_HOST = `unix://${join(dir, "no-docker.sock")}`;
    let error: unknown;
    try {
      await runIteration(cfg, { progress: false, runId: "infra", log: () => {} }).catch((e: unknown) => (error = e));
    } finally {
      if (before === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = before;
    }
    expect(error).toMatchObject({ code: "rollout_failed" });
    expect((error as Error).message).toMatch(/^iteration 1: all 16 programs ended in sandbox failures \(sandbox_error 16\), none by the policy's doing, so there is nothing to learn from; the first, \S+: .*no-docker\.sock/);
    const store = new SqliteTrajectoryStore(join(dir, "infra", "store.sqlite"));
    try {
      const programs = (await store.listTrajectories("infra")).map((t) => t.program.termination?.kind);
      expect(programs).toEqual(Array(16).fill("sandbox_error"));
    } finally {
      await store.close();
    }
  }, 120_000);
});
