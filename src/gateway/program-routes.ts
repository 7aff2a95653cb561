// The program admin routes: create a program (and its key), read its entry and trace, release it.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ArborError } from "../core/errors.js";
import type { Call } from "../core/types.js";
import { GatewayRejection } from "./auth/auth-errors.js";
import type { GatewayContext } from "./gateway-context.js";
import { InvalidRequestError } from "./http-errors.js";
import type { ProgramRelease } from "./program-release.js";

export interface ProgramRoutesOptions {
  /** Where GET /programs/:id/trace reads a program's recorded calls (GatewayOptions.traceSource). */
  traceSource: { callsOf(programId: string): Call[] } | undefined;
  /** Program id for POST /programs without one. */
  newProgramId: () => string;
  release: ProgramRelease;
}

/** Register GET/POST /programs, GET /programs/:id(/trace) and POST /programs/:id/release on `app`. */
export function registerProgramRoutes(app: FastifyInstance, ctx: GatewayContext, o: ProgramRoutesOptions): void {
  const { table, keys } = ctx;
  app.get("/programs", async () => ({ programs: table.list() }));
  // The orchestrator creates a program and gets its key: shown here once, stored only as a hash.
  app.post("/programs", async (req: FastifyRequest<{ Body: unknown }>, reply) => {
    const body = req.body ?? {};
    if (typeof body !== "object" || Array.isArray(body)) throw new InvalidRequestError(null, "body: must be a JSON object like {\"id\": \"<program-id>\"} or empty");
    const given = (body as { id?: unknown }).id;
    if (given !== undefined && typeof given !== "string") throw new InvalidRequestError("id", `must be a string, got ${typeof given}`);
    const id = given ?? o.newProgramId();
    if (table.get(id) || keys.hasKey(id)) {
      throw new GatewayRejection(409, "invalid_request_error", "program_exists", `program '${id}' already exists; create each program once`);
    }
    table.open(id);
    let apiKey: string;
    try {
      apiKey = keys.issue(id);
    } catch (e) {
      table.release(id);
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
    const calls = o.traceSource.callsOf(id);
    if (calls.length === 0 && !table.get(id)) throw new ArborError(`program '${id}' is not known to the gateway`, "program_unknown");
    return { program_id: id, calls };
  });
  app.post("/programs/:id/release", async (req: FastifyRequest<{ Params: { id: string } }>) => {
    const id = req.params.id;
    const wasActive = table.get(id)?.state === "active";
    const released = table.release(id);
    o.release.forget(id);
    if (wasActive) o.release.terminated(id, "released");
    return released;
  });
}
