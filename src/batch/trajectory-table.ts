// Trajectory rows (trajectory-rows.ts) as an Apache Arrow table: the one columnar form the Arrow IPC and the
// Parquet exports write, so both carry the same column names and types (docs/batch-schema.md). Token ids and
// versions are int32 lists, logprobs and advantages float64 lists (bit-exact), the prompt a list of
// {role, content} structs (verl's chat `prompt`), nullable scalars null where the store has nothing.
import { Bool, Field, Float64, Int32, List, Struct, Table, Utf8, vectorFromArray, type DataType } from "apache-arrow";
import type { TrajectoryRow } from "./trajectory-rows.js";

/** Version of the trajectory table's schema, in the `arbor.schema` metadata; bumped on any incompatible change. */
export const TRAJECTORY_SCHEMA_VERSION = "arbor.trajectories.v1";

const listOf = (t: DataType): List => new List(new Field("item", t, true));

/** Every column with its Arrow type, in file order. */
const COLUMNS: readonly [keyof TrajectoryRow, () => DataType][] = [
  ["run_id", () => new Utf8()],
  ["program_id", () => new Utf8()],
  ["group_id", () => new Utf8()],
  ["task_id", () => new Utf8()],
  ["sample_index", () => new Int32()],
  ["call_index", () => new Int32()],
  ["call_id", () => new Utf8()],
  ["prompt", () => listOf(new Struct([new Field("role", new Utf8(), false), new Field("content", new Utf8(), false)]))],
  ["response", () => new Utf8()],
  ["prompt_ids", () => listOf(new Int32())],
  ["output_ids", () => listOf(new Int32())],
  ["logprobs", () => listOf(new Float64())],
  ["policy_versions", () => listOf(new Int32())],
  ["finish_reason", () => new Utf8()],
  ["trainable", () => new Bool()],
  ["context_reset", () => new Bool()],
  ["context_reset_reason", () => new Utf8()],
  ["served_model", () => new Utf8()],
  ["requested_model", () => new Utf8()],
  ["max_tokens_asked", () => new Int32()],
  ["max_tokens_granted", () => new Int32()],
  ["reward", () => new Float64()],
  ["reward_components", () => new Utf8()],
  ["termination", () => new Utf8()],
  ["termination_detail", () => new Utf8()],
  ["iteration", () => new Int32()],
  ["attempt", () => new Int32()],
  ["superseded", () => new Bool()],
  ["held_out_version", () => new Int32()],
  ["batch_id", () => new Utf8()],
  ["advantages", () => listOf(new Float64())],
];

/** The column names of the trajectory table, in order. */
export const TRAJECTORY_COLUMNS: readonly (keyof TrajectoryRow)[] = COLUMNS.map(([name]) => name);

/** The rows as an Arrow table with schema metadata `arbor.schema` = {@link TRAJECTORY_SCHEMA_VERSION}. */
export function trajectoryTable(rows: readonly TrajectoryRow[]): Table {
  const vectors = Object.fromEntries(COLUMNS.map(([name, type]) => [name, vectorFromArray(rows.map((r) => r[name]), type())]));
  const table = new Table(vectors);
  table.schema.metadata.set("arbor.schema", TRAJECTORY_SCHEMA_VERSION);
  return table;
}
