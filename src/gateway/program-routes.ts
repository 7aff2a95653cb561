// The program admin routes: create a program (its key and, store-backed, its stored row), read its
// entry and trace, end it (with the termination the caller gives, recorded in the store).
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ArborError } from "../core/errors.js";
import type { Call, Termination, TerminationKind } from "../core/types.js";
import { TERMINATION_KINDS } from "../store/trajectory-store.js";
import { GatewayRejection } from "./auth/auth-errors.js";
import type { GatewayContext } from "./gateway-context.js";
import { InvalidRequestError } from "./http-errors.js";
import type { ProgramRelease } from "./program-release.js";
import type { ProgramPlace } from "./program-table.js";

export interface ProgramRoutesOptions {
  /** Where GET /programs/:id/trace reads a program's recorded calls (GatewayOptions.traceSource). */
  traceSource: { callsOf(programId: string): Call[] | Promise<Call[]> } | undefined;
  /** Program id for POST /programs without one. */
  newProgramId: () => string;
  release: ProgramRelease;
}

function objectBody(body: unknown, shape: string): Record<string, unknown> {
  const b = body ?? {};
  if (typeof b !== "object" || Array.isArray(b)) throw new InvalidRequestError(null, `body: must be a JSON object like ${shape} or empty`);
  return b as Record<string, unknown>;
}

function optionalString(b: Record<string, unknown>, field: string): string | undefined {
  const v = b[field];
  if (v === undefined) return undefined;
  if (typeof v !== "string" || v.length === 0) throw new InvalidRequestError(field, `must be a non-empty string, got ${typeof v === "string" ? "''" : typeof v}`);
  return v;
}

/** Where POST /programs places the program in the store (every field optional). */
function placeOf(b: Record<string, unknown>): ProgramPlace {
  const place: ProgramPlace = {};
  const runId = optionalString(b, "run_id");
  const groupId = optionalString(b, "group_id");
  const taskId = optionalString(b, "task_id");
  if (runId !== undefined) place.runId = runId;
  if (groupId !== undefined) place.groupId = groupId;
  if (taskId !== undefined) place.taskId = taskId;
  const index = b.sample_index;
  if (index !== undefined) {
    if (!(typeof index === "number" && Number.isInteger(index) && index >= 0)) {
      throw new InvalidRequestError("sample_index", `must be an integer >= 0, got ${JSON.stringify(index)}`);
    }
    place.sampleIndex = index;
  }
  const variant = b.variant as { id?: unknown; kind?: unknown } | undefined;
  if (variant !== undefined) {
    if (typeof variant !== "object" || variant === null || typeof variant.id !== "string" || (variant.kind !== "variant" && variant.kind !== "perturbation")) {
      throw new InvalidRequestError("variant", 'must be {"id": "<id>", "kind": "variant" | "perturbation"}');
    }
    place.variant = { id: variant.id, kind: variant.kind };
  }
  return place;
}

/** The termination a release names (`{"termination": {"kind": ..., "detail": ...}}`), if any. */
function terminationOf(b: Record<string, unknown>): Termination | undefined {
  const t = b.termination as { kind?: unknown; detail?: unknown } | undefined;
  if (t === undefined) return undefined;
  if (typeof t !== "object" || t === null || !TERMINATION_KINDS.includes(t.kind as TerminationKind)) {
    throw new InvalidRequestError("termination.kind", `must be one of ${TERMINATION_KINDS.join(", ")}`);
  }
  if (t.detail !== undefined && typeof t.detail !== "string") throw new InvalidRequestError("termination.detail", "must be a string");
  return { kind: t.kind as TerminationKind, ...(t.detail !== undefined ? { detail: t.detail as string } : {}) };
}

/** Register GET/POST /programs, GET /programs/:id(/trace) and POST /programs/:id/release on `app`. */
export function registerProgramRoutes(app: FastifyInstance, ctx: GatewayContext, o: ProgramRoutesOptions): void {
  const { table, keys } = ctx;
  app.get("/programs", async () => ({ programs: table.list() }));
  // The orchestrator creates a program and gets its key: shown here once, stored only as a hash.
  // Store-backed, the program's row is created here too (run_id, group_id, task_id, sample_index).
  app.post("/programs", async (req: FastifyRequest<{ Body: unknown }>, reply) => {
    const body = objectBody(req.body, '{"id": "<program-id>"}');
    const given = body.id;
    if (given !== undefined && typeof given !== "string") throw new InvalidRequestError("id", `must be a string, got ${typeof given}`);
    const id = given ?? o.newProgramId();
    const place = placeOf(body);
    if (table.get(id) || keys.hasKey(id)) {
      throw new GatewayRejection(409, "invalid_request_error", "program_exists", `program '${id}' already exists; create each program once`);
    }
    await table.create(id, place);
    let apiKey: string;
    try {
      apiKey = keys.issue(id);
    } catch (e) {
      await table.end(id, { kind: "aborted", detail: `no program key could be issued: ${e instanceof Error ? e.message : String(e)}` });
      throw e;
    }
    return reply.code(201).send({ id, api_key: apiKey });
  });
  app.get("/programs/:id", async (req: FastifyRequest<{ Params: { id: string } }>) => {
    const entry = table.get(req.params.id);
    if (!entry) throw new ArborError(`program '${req.params.id}' is not known to the gateway`, "program_unknown");
    return entry;
  });
  app.get("/programs/:id/trace", async (req: FastifyRequest<{ Params: { id: string } }>) => {
    const id = req.params.id;
    if (!o.traceSource) {
      throw new GatewayRejection(501, "invalid_request_error", "trace_unavailable", "this gateway was started without a trace source; read traces from the trajectory store");
    }
    const calls = await o.traceSource.callsOf(id);
    if (calls.length === 0 && !table.get(id)) throw new ArborError(`program '${id}' is not known to the gateway`, "program_unknown");
    return { program_id: id, calls };
  });
  // Ends the program: its later calls are refused; store-backed, the answer comes once its row has
  // ended with the termination given (default: completed, "released without a termination").
  app.post("/programs/:id/release", async (req: FastifyRequest<{ Params: { id: string }; Body: unknown }>) => {
    const id = req.params.id;
    const termination = terminationOf(objectBody(req.body, '{"termination": {"kind": "completed"}}'));
    const wasActive = table.get(id)?.state === "active";
    const released = table.release(id, termination);
    o.release.forget(id);
    if (wasActive) o.release.terminated(id, "released");
    try {
      await table.ended(id);
    } catch (e) {
      throw new ArborError(`program '${id}' ended, but its end could not be recorded: ${e instanceof Error ? e.message : String(e)}`, "record_failed");
    }
    return released;
  });
}
