// Versioned schema migrations of the Postgres trajectory store: each migration is applied once, in
// its own transaction, under an advisory lock (two processes opening a fresh schema at once do not
// race), and recorded in `arbor_schema_migrations`; a schema at a newer version than this build
// knows is refused rather than written with the wrong layout.
import type { PoolClient } from "pg";
import { ArborError } from "../core/errors.js";

/** One step of the schema. Versions start at 1 and increase by one. */
export interface PostgresMigration {
  version: number;
  description: string;
  /** Statements run with the store's schema first on the search path. */
  sql: string;
}

/** What `migratePostgres` did. */
export interface MigrationResult {
  /** Versions applied by this call, in order (empty when the schema was current). */
  applied: number[];
  /** The schema's version afterwards. */
  version: number;
}

// Token ids and logprobs are bytea through codec.ts (Int32 LE / float64 LE), as in SQLite: one
// encoding for both stores, bit-exact (-0, -Infinity), 4 bytes per token with no per-element
// overhead, and a token count is octet_length / 4. `seq` columns keep creation and record order.
const V1 = `
CREATE TABLE runs (
  seq bigserial UNIQUE,
  id text PRIMARY KEY,
  name text NOT NULL,
  config_json text NOT NULL,
  started_at float8 NOT NULL,
  ended_at float8
);
CREATE TABLE run_owners (
  run_id text PRIMARY KEY REFERENCES runs(id),
  host text NOT NULL,
  boot_id text NOT NULL,
  pid integer NOT NULL,
  pid_start bigint NOT NULL,
  heartbeat_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE groups (
  seq bigserial UNIQUE,
  id text PRIMARY KEY,
  run_id text NOT NULL REFERENCES runs(id),
  task_id text NOT NULL,
  program_ids jsonb NOT NULL
);
CREATE INDEX groups_run ON groups(run_id, seq);
CREATE TABLE programs (
  seq bigserial UNIQUE,
  id text PRIMARY KEY,
  run_id text NOT NULL REFERENCES runs(id),
  group_id text NOT NULL REFERENCES groups(id),
  task_id text NOT NULL,
  sample_index integer NOT NULL,
  state text NOT NULL,
  created_at float8 NOT NULL,
  ended_at float8,
  termination_kind text,
  termination_detail text
);
CREATE INDEX programs_run ON programs(run_id, seq);
CREATE TABLE calls (
  id text PRIMARY KEY,
  program_id text NOT NULL REFERENCES programs(id),
  idx integer NOT NULL,
  messages text NOT NULL,
  prompt_token_ids bytea NOT NULL,
  output_token_ids bytea NOT NULL,
  logprobs bytea NOT NULL,
  output_text text NOT NULL,
  finish_reason text NOT NULL,
  backend text NOT NULL,
  policy_version integer NOT NULL,
  start_ms float8 NOT NULL,
  end_ms float8 NOT NULL,
  trainable boolean NOT NULL,
  context_reset boolean NOT NULL,
  token_policy_versions bytea,
  served_model text,
  context_reset_reason text,
  CONSTRAINT calls_program_idx UNIQUE (program_id, idx)
);
CREATE TABLE tools (
  seq bigserial PRIMARY KEY,
  program_id text NOT NULL REFERENCES programs(id),
  call_index integer NOT NULL,
  tool text NOT NULL,
  input text NOT NULL,
  output text NOT NULL,
  ok boolean NOT NULL,
  duration_ms float8 NOT NULL
);
CREATE INDEX tools_program ON tools(program_id, seq);
CREATE TABLE context_events (
  seq bigserial PRIMARY KEY,
  program_id text NOT NULL REFERENCES programs(id),
  call_index integer NOT NULL,
  policy text NOT NULL,
  action text NOT NULL,
  tokens_before integer NOT NULL,
  tokens_after integer NOT NULL,
  messages_before integer NOT NULL,
  messages_after integer NOT NULL,
  detail text
);
CREATE INDEX context_events_program ON context_events(program_id, seq);
CREATE TABLE rewards (
  program_id text PRIMARY KEY REFERENCES programs(id),
  total float8 NOT NULL,
  components text NOT NULL
);
`;

// The model name the client asked for, and a max_tokens the gateway clamped to what the context
// left (asked, granted; NULL: served as asked).
const V2 = `
ALTER TABLE calls ADD COLUMN requested_model text;
ALTER TABLE calls ADD COLUMN max_tokens_asked integer;
ALTER TABLE calls ADD COLUMN max_tokens_granted integer;
`;

// The iteration each group was rolled out in: a run has one id and its iterations belong to it (NULL: not
// known, as for every group written before).
const V3 = `
ALTER TABLE groups ADD COLUMN iteration integer;
`;

// Held-out evaluation groups, marked with the policy version they scored: they belong to their run but are never
// trained on (NULL: a training group, as every group written before).
const V4 = `
ALTER TABLE groups ADD COLUMN held_out_version integer;
`;

// A call stored over an earlier call of its program (call-delta.ts): base_idx names it (NULL: the row is whole),
// prompt_shared and messages_shared count the leading context ids and messages it shares with it, the prompt and
// messages columns hold the rest. content_sha is the SHA-256 of the call's whole content (postgres-call-rows.ts),
// which an identical retry is recognised by whatever form either copy is stored in (NULL: a row written before,
// stored whole, compared column by column).
const V5 = `
ALTER TABLE calls ADD COLUMN base_idx integer;
ALTER TABLE calls ADD COLUMN prompt_shared integer NOT NULL DEFAULT 0;
ALTER TABLE calls ADD COLUMN messages_shared integer NOT NULL DEFAULT 0;
ALTER TABLE calls ADD COLUMN content_sha bytea;
`;

// Which resume of its run rolled a group out (NULL: the run's first process, as for every group written before): a
// resumed run rolls out again the iteration or evaluation a kill cut.
const V6 = `
ALTER TABLE groups ADD COLUMN attempt integer;
`;

/** The store's migrations, oldest first. Append new ones; never edit an applied one. */
export const POSTGRES_MIGRATIONS: readonly PostgresMigration[] = [
  { version: 1, description: "trajectory store tables", sql: V1 },
  { version: 2, description: "calls: requested model, clamped max_tokens", sql: V2 },
  { version: 3, description: "groups: the iteration of their run", sql: V3 },
  { version: 4, description: "groups: the policy version a held-out evaluation group scored", sql: V4 },
  { version: 5, description: "calls: stored as deltas over an earlier call of their program, with a content hash", sql: V5 },
  { version: 6, description: "groups: the resume of their run that rolled them out", sql: V6 },
];

/** A schema name usable unquoted: lower-case letters, digits and `_`, at most 63 bytes. */
export const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function checkMigrations(migrations: readonly PostgresMigration[]): void {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) throw new ArborError(`postgres migrations: migration ${i} has version ${m.version}, expected ${i + 1}`, "store");
  });
}

/**
 * Bring `schema` (created if absent) to the newest of `migrations`, using `client` (not in a
 * transaction). Each missing migration runs in its own transaction holding a per-schema advisory
 * lock, so concurrent openers apply it once. Throws an {@link ArborError} when the schema holds
 * tables but no migrations table (not an Arbor store) or is at a version newer than `migrations`.
 */
export async function migratePostgres(
  client: PoolClient,
  schema: string,
  migrations: readonly PostgresMigration[] = POSTGRES_MIGRATIONS,
): Promise<MigrationResult> {
  if (!SCHEMA_NAME.test(schema)) throw new ArborError(`schema: '${schema}' must match ${SCHEMA_NAME}`, "config");
  checkMigrations(migrations);
  const latest = migrations.length;
  const applied: number[] = [];
  const lockKey = `arbor_store:${schema}`;
  for (;;) {
    let attempting: number | undefined;
    await client.query("BEGIN");
    try {
      await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [lockKey]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
      const table = await client.query<{ present: boolean; others: number }>(
        `SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'arbor_schema_migrations') AS present,
                (SELECT count(*)::int FROM pg_tables WHERE schemaname = $1) AS others`,
        [schema],
      );
      const row = table.rows[0] as { present: boolean; others: number };
      if (!row.present) {
        if (row.others > 0) throw new ArborError(`schema '${schema}' has tables but no arbor_schema_migrations; not an Arbor store`, "store");
        await client.query(
          `CREATE TABLE ${quoteIdent(schema)}.arbor_schema_migrations (
             version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
        );
      }
      const res = await client.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${quoteIdent(schema)}.arbor_schema_migrations`);
      const current = res.rows[0]?.v ?? 0;
      if (current > latest) {
        throw new ArborError(`schema '${schema}' is at version ${current}, newer than this build's ${latest}; upgrade Arbor to open it`, "store");
      }
      if (current === latest) {
        await client.query("COMMIT");
        return { applied, version: current };
      }
      const next = migrations[current] as PostgresMigration;
      attempting = next.version;
      await client.query(`SET LOCAL search_path TO ${quoteIdent(schema)}`);
      await client.query(next.sql);
      await client.query(`INSERT INTO ${quoteIdent(schema)}.arbor_schema_migrations (version, description) VALUES ($1, $2)`, [
        next.version,
        next.description,
      ]);
      await client.query("COMMIT");
      applied.push(next.version);
    } catch (e) {
      await client.query("ROLLBACK").catch(() => undefined);
      if (e instanceof ArborError) throw e;
      const step = attempting === undefined ? "reading its version" : `migration ${attempting}`;
      throw new ArborError(`schema '${schema}': ${step} failed: ${(e as Error).message}`, "store");
    }
  }
}
