// Program-aware engine endpoints (ThunderAgent-style): pause a program (hold its requests, move its
// KV to L2/L3 or drop it), restore it, and say where its KV is. Only executors with the `programs`
// capability (the scheduled ones) serve them; the others answer 501.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "../../core/zod.js";
import { ArborError } from "../../core/errors.js";
import type { ProgramControl, ProgramInfo } from "../executor.js";
import { fromZodError, HttpError, invalidRequest } from "../openai-errors.js";
import type { ExecutorSlot } from "./executor-slot.js";

const PauseSchema = z.object({
  to: z.enum(["L2", "L3", "drop"], { error: 'must be "L2", "L3" or "drop"' }),
});

export interface ProgramRouteDeps {
  slot: ExecutorSlot;
}

/** Register POST /v1/programs/:id/pause, POST /v1/programs/:id/restore and GET /v1/programs/:id. */
export function registerProgramRoutes(app: FastifyInstance, deps: ProgramRouteDeps): void {
  const { slot } = deps;

  /** The serving executor's program hooks; 503 while asleep, 501 when it has none. */
  const control = (): ProgramControl => {
    if (slot.sleeping) throw new HttpError(503, "engine is sleeping (POST /wake_up to resume serving)", "server_error", null, "engine_sleeping");
    const programs = slot.executor.programs;
    if (!programs) {
      throw new HttpError(
        501,
        'this engine\'s executor does not support program pause/restore (use the scheduled executor, executorKind "llamacpp-scheduled")',
        "not_implemented_error",
        null,
        "not_implemented",
      );
    }
    return programs;
  };

  app.post("/v1/programs/:id/pause", async (request) => {
    const id = programId(request);
    const parsed = PauseSchema.safeParse(request.body ?? {});
    if (!parsed.success) throw fromZodError(parsed.error);
    const programs = control();
    return view(await mapErrors(() => programs.pause(id, parsed.data.to), "to"));
  });

  app.post("/v1/programs/:id/restore", async (request) => {
    const id = programId(request);
    const programs = control();
    return view(await mapErrors(() => programs.restore(id), null));
  });

  app.get("/v1/programs/:id", async (request) => view(control().info(programId(request))));
}

function programId(request: FastifyRequest): string {
  const id = (request.params as { id?: unknown }).id;
  if (typeof id !== "string" || id === "") throw invalidRequest("id", "the program id in the path must not be empty");
  if (id.length > 256) throw invalidRequest("id", "the program id must be at most 256 characters");
  return id;
}

/** Executor refusals of the input become 400 naming `param`; a full store 507. */
async function mapErrors<T>(fn: () => Promise<T>, param: string | null): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ArborError && err.code === "invalid_request") throw invalidRequest(param, err.message);
    if (err instanceof ArborError && err.code === "capacity") throw new HttpError(507, err.message, "server_error", null, "kv_store_full");
    throw err;
  }
}

/** The answer's shape (snake_case, as the rest of the engine API). */
function view(info: ProgramInfo): Record<string, unknown> {
  return {
    object: "program",
    id: info.programId,
    paused: info.paused,
    kv_location: info.kv,
    kv_tokens: info.kvTokens,
    held_requests: info.heldRequests,
    running_requests: info.runningRequests,
  };
}
