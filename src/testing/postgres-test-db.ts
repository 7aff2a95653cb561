// Test support for the Postgres store: the server tests use (ARBOR_TEST_POSTGRES_URL), whether it
// answers, and one throwaway schema per test so tests never see each other's rows.
import { randomBytes } from "node:crypto";
import pg from "pg";

/** The server tests use. */
export const POSTGRES_TEST_URL = process.env.ARBOR_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** Why the test server cannot be used, or undefined when it answers a query. */
export async function postgresUnreachable(url = POSTGRES_TEST_URL): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
    return undefined;
  } catch (e) {
    return `Postgres at ${url} is unreachable (${(e as Error).message || (e as Error).name}); set ARBOR_TEST_POSTGRES_URL`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A fresh schema name, `arbor_test_<random>`. */
export function testSchemaName(): string {
  return `arbor_test_${randomBytes(6).toString("hex")}`;
}

/** Run one statement on its own connection (for setting up or inspecting what a store wrote). */
export async function postgresQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(
  sql: string,
  params: unknown[] = [],
  url = POSTGRES_TEST_URL,
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  await client.connect();
  try {
    return (await client.query<R>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/** Drop a test schema and everything in it. */
export async function dropTestSchema(schema: string, url = POSTGRES_TEST_URL): Promise<void> {
  if (!/^arbor_test_[0-9a-f]+$/.test(schema)) throw new Error(`refusing to drop '${schema}': not a test schema`);
  await postgresQuery(`DROP SCHEMA IF EXISTS ${schema} CASCADE`, [], url);
}
