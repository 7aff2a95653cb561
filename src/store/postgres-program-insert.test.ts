import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { dropTestSchema, POSTGRES_TEST_URL, postgresUnreachable, testSchemaName } from "../testing/postgres-test-db.js";
import { fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import { insertProgram } from "./postgres-program-insert.js";
import { PostgresTrajectoryStore } from "./postgres-store.js";

const unreachable = await postgresUnreachable();

describe.skipIf(unreachable !== undefined)(`insertProgram (${unreachable ?? POSTGRES_TEST_URL})`, () => {
  let schema: string;
  let client: pg.Client;
  const group = { ...fixtureGroup("g"), programIds: [] };

  beforeEach(async () => {
    schema = testSchemaName();
    // The store makes the schema, its run and its group; the inserts under test run on a plain connection to it.
    const store = await PostgresTrajectoryStore.open({ url: POSTGRES_TEST_URL, schema });
    await store.createRun(fixtureRun());
    await store.createGroup(group);
    await store.close();
    client = new pg.Client({ connectionString: POSTGRES_TEST_URL });
    await client.connect();
    await client.query(`SET search_path TO ${schema}`);
  });

  afterEach(async () => {
    await client.end();
    await dropTestSchema(schema);
  });

  /**
   * The connection, with its first `lost` program inserts answering "nothing inserted" unsent: what the insert
   * finds when the group (or run) it needs was committed by another store after its snapshot was taken.
   */
  const racing = (lost: number): pg.PoolClient => {
    let n = 0;
    const query = (text: string, values?: unknown[]): Promise<unknown> =>
      text.startsWith("WITH inserted") && n++ < lost ? Promise.resolve({ rows: [{ n: 0 }], rowCount: 1 }) : client.query(text, values);
    return { query } as unknown as pg.PoolClient;
  };
  const rows = async (): Promise<{ programs: number; members: string[] }> => ({
    programs: (await client.query<{ n: number }>("SELECT count(*)::int AS n FROM programs")).rows[0]?.n ?? -1,
    members: (await client.query<{ program_ids: string[] }>("SELECT program_ids FROM groups WHERE id = 'g'")).rows[0]?.program_ids ?? [],
  });

  it("inserts the program and lists it in its group in one statement; a retry changes nothing", async () => {
    const p = fixtureProgram(group, 0);
    const sent: string[] = [];
    const counting = { query: (text: string, values?: unknown[]) => (sent.push(text), client.query(text, values)) } as unknown as pg.PoolClient;
    await insertProgram(counting, p, "create");
    expect(sent).toHaveLength(1);
    await insertProgram(client as unknown as pg.PoolClient, p, "create");
    expect(await rows()).toEqual({ programs: 1, members: ["g-p0"] });
  });

  it("inserts again when the first insert found no group that another store has committed since", async () => {
    await insertProgram(racing(1), fixtureProgram(group, 0), "create");
    expect(await rows()).toEqual({ programs: 1, members: ["g-p0"] });
  });

  it("refuses, naming it, a program that twice finds nothing to insert into though its group and id check out", async () => {
    await expect(insertProgram(racing(2), fixtureProgram(group, 0), "create 'g-p0'")).rejects.toThrow(
      "create 'g-p0': not inserted, though its group and id were checked (changed by another store meanwhile)",
    );
    expect(await rows()).toEqual({ programs: 0, members: [] });
  });

  it("names why nothing was inserted: the run, the id, the group, its run and its task", async () => {
    const c = client as unknown as pg.PoolClient;
    await insertProgram(c, fixtureProgram(group, 0), "create");
    await client.query("INSERT INTO runs (id, name, config_json, started_at) VALUES ('run-2', 'r2', '{}', 0)");
    const x = { ...fixtureProgram(group, 1), id: "x" };
    await expect(insertProgram(c, { ...x, runId: "run-9" }, "create 'x'")).rejects.toThrow("create 'x': unknown run 'run-9'");
    await expect(insertProgram(c, { ...fixtureProgram(group, 0), sampleIndex: 3 }, "create")).rejects.toThrow("createProgram: program 'g-p0' already exists");
    await expect(insertProgram(c, { ...x, groupId: "g9" }, "create 'x'")).rejects.toThrow("create 'x': unknown group 'g9'");
    await expect(insertProgram(c, { ...x, runId: "run-2" }, "create 'x'")).rejects.toThrow("create 'x': group 'g' belongs to run 'run-1', not 'run-2'");
    await expect(insertProgram(c, { ...x, taskId: "t2" }, "create 'x'")).rejects.toThrow("create 'x': group 'g' is for task 'task-g', not 't2'");
    expect(await rows()).toEqual({ programs: 1, members: ["g-p0"] });
  });
});
