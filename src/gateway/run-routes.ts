// The run admin routes: a client that creates programs at a store-backed gateway without a default run (a
// deployment's `arbor serve gateway`) first needs a run for them — `arbor validate`'s judge panel, an external
// orchestrator. POST /runs creates one in the gateway's store, POST /runs/:id/end ends it: only a run this gateway
// created (a run an orchestrator writes itself is that process's to end; ending it here would cut its iterations).
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Clock } from "../core/clock.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";
import { GatewayRejection } from "./auth/auth-errors.js";
import { InvalidRequestError } from "./http-errors.js";

/** The store writes of the run routes. */
export type RunStore = Pick<TrajectoryStore, "createRun" | "finishRun" | "getRun">;

/** Longest run id and name, characters. */
const MAX_RUN_TEXT = 256;

/** A required or optional non-empty string field of at most MAX_RUN_TEXT characters. */
function textField(b: Record<string, unknown>, field: string, required: boolean): string | undefined {
  const v = b[field];
  if (v === undefined && !required) return undefined;
  if (typeof v !== "string" || v.length === 0 || v.length > MAX_RUN_TEXT) {
    throw new InvalidRequestError(field, `${v === undefined ? "required: " : ""}a string of 1-${MAX_RUN_TEXT} characters${v === undefined ? "" : `, got ${JSON.stringify(v).slice(0, 40)}`}`);
  }
  return v;
}

/** Register POST /runs and POST /runs/:id/end on `app` (store-backed gateways; others answer 400). */
export function registerRunRoutes(app: FastifyInstance, store: RunStore | undefined, clock: Clock, newRunId: () => string): void {
  /** The runs this gateway created and has not ended (bounded by the store: one row each). */
  const created = new Set<string>();
  const storeOf = (): RunStore => {
    if (store === undefined) throw new InvalidRequestError(null, "this gateway has no store: its programs need no run (create them without run_id)");
    return store;
  };
  app.post("/runs", async (req: FastifyRequest<{ Body: unknown }>, reply) => {
    const s = storeOf();
    const b = req.body ?? {};
    if (typeof b !== "object" || Array.isArray(b)) throw new InvalidRequestError(null, 'body: must be a JSON object like {"name": "<run name>"}');
    const body = b as Record<string, unknown>;
    const name = textField(body, "name", true) as string;
    const id = textField(body, "id", false) ?? newRunId();
    const config = body.config ?? {};
    if (typeof config !== "object" || config === null || Array.isArray(config)) throw new InvalidRequestError("config", "must be a JSON object (the run's settings, kept as its config)");
    if ((await s.getRun(id)) !== undefined) throw new GatewayRejection(409, "invalid_request_error", "run_exists", `run '${id}' already exists; create each run once`);
    await s.createRun({ id, name, configJson: JSON.stringify(config), startedAt: clock.now() });
    created.add(id);
    return reply.code(201).send({ id });
  });
  app.post("/runs/:id/end", async (req: FastifyRequest<{ Params: { id: string } }>) => {
    const s = storeOf();
    const { id } = req.params;
    const run = await s.getRun(id);
    if (run === undefined) throw new GatewayRejection(404, "invalid_request_error", "run_unknown", `run '${id}' is not in the gateway's store`);
    // Ending an ended run again is a no-op: a client's retry after a lost answer succeeds.
    if (run.endedAt !== undefined) return { id, ended: true };
    if (!created.has(id)) throw new GatewayRejection(403, "permission_error", "forbidden", `run '${id}' was not created through this gateway: its own process ends it`);
    await s.finishRun(id, clock.now());
    created.delete(id);
    return { id, ended: true };
  });
}
