// `arbor run` on the networked store (store.kind: postgres) end to end: a small real RL run of two iterations
// records every program, call and reward in Postgres, trains on them, and another store object on the same
// schema (another process would open it the same way) reads back exactly the trajectories of each iteration.
import { chmodSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseRunConfig } from "../core/config.js";
import { openStore } from "../store/registry.js";
import { dropTestSchema, POSTGRES_TEST_URL, postgresUnreachable, testSchemaName } from "../testing/postgres-test-db.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { runIteration, type RunSummary } from "./run.js";
import { iterationTrajectories } from "../testing/iteration-trajectories.js";

const UNREACHABLE = await postgresUnreachable();
const dir = mkdtempSync(join(tmpdir(), "arbor-pg-run-"));
chmodSync(dir, 0o755);
const schema = testSchemaName();

describe.skipIf(UNREACHABLE !== undefined)(`arbor run with store.kind: postgres${UNREACHABLE ? ` (skipped: ${UNREACHABLE})` : ""}`, () => {
  let summary: RunSummary;
  beforeAll(async () => {
    const cfg = parseRunConfig(smallRlConfig(dir, "pg-run", { env: { name: "calc", tasks: 2, seed: 7 }, iterations: 2, store: { kind: "postgres", url: POSTGRES_TEST_URL, schema } }));
    summary = await runIteration(cfg, { progress: false, runId: "pg-run" });
  }, 300_000);
  afterAll(() => dropTestSchema(schema));

  it("records both iterations in Postgres, names the store, and another store object reads them back", async () => {
    expect(summary.storePath).toBe(`postgres store ${POSTGRES_TEST_URL} (schema ${schema})`);
    const store = await openStore({ kind: "postgres", url: POSTGRES_TEST_URL, schema });
    try {
      for (const r of summary.iterations) {
        const trajectories = await iterationTrajectories(store, r.runId, r.iteration);
        expect(trajectories).toHaveLength(8);
        for (const t of trajectories) {
          expect(t.program.termination?.kind).toBeDefined();
          expect(t.reward).toBeDefined();
          expect(t.calls.length).toBeGreaterThan(0);
          expect(new Set(t.calls.map((c) => c.policyVersion))).toEqual(new Set([r.policyVersion]));
        }
      }
      // One run ("pg-run"): both iterations' programs belong to it.
      const stats = await store.stats("pg-run");
      expect(stats.programs).toBe(16);
      expect(stats.unfinished).toBe(0);
      expect(summary.iterations.map((r) => r.runId)).toEqual(["pg-run", "pg-run"]);
      expect((await store.listRuns()).map((r) => r.id)).toEqual(["pg-run"]);
    } finally {
      await store.close();
    }
  });

  it("refuses a postgres store without a url, and sqlite options on the sqlite store, naming the field", () => {
    expect(() => parseRunConfig({ engines: [{ name: "e0" }], store: { kind: "postgres" } })).toThrow(/store\.url: required for the postgres store/);
    expect(() => parseRunConfig({ engines: [{ name: "e0" }], store: { schema: "x" } })).toThrow(/store\.schema: only used with kind: postgres/);
  });
});
