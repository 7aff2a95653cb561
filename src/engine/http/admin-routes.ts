// Engine control endpoints used by an RL loop: vLLM's `/sleep`, `/wake_up`, `/is_sleeping`, and
// Arbor's weight switch `/v1/load_weights` with `/v1/policy_version`.
//
// `/v1/load_weights` body: `model_path`, `policy_version` (greater than the current one) and
// `in_flight`: "finish" (running requests end on the old version), "abort" (they end at once with
// finish reason `abort`) or "resume" (they stop between steps and continue on the new version,
// one answer per request with `token_policy_versions` saying which version made each token).
//
// Sleep levels. vLLM level 1 offloads the weights to CPU memory and drops the KV cache; level 2
// drops both. llama.cpp cannot free a context's KV cache without closing the context, and the
// host copy of the weights is the GGUF file itself, so here both levels close the executor
// (context KV memory and weights) once running requests have finished, and /wake_up reloads it
// from the GGUF of the current policy version. The level is validated and reported, not acted
// on differently. While asleep, inference requests get 503 and /v1/load_weights is refused (503).
import type { FastifyInstance } from "fastify";
import { z } from "../../core/zod.js";
import { fromZodError, invalidRequest } from "../openai-errors.js";
import type { ExecutorSlot, InFlightPolicy } from "./executor-slot.js";

const LoadWeightsSchema = z.object({
  model_path: z.string({ error: "must be the path of a GGUF file" }).min(1, { error: "must not be empty" }),
  policy_version: z.number({ error: "must be a number" }).int({ error: "must be an integer" }).min(0),
  in_flight: z.enum(["finish", "abort", "resume"], { error: 'must be "finish", "abort" or "resume"' }).nullish(),
});

export interface AdminRouteDeps {
  slot: ExecutorSlot;
  /** `in_flight` when a /v1/load_weights request names none. */
  defaultInFlight: InFlightPolicy;
}

/** Register /sleep, /wake_up, /is_sleeping, /v1/load_weights and /v1/policy_version. */
export function registerAdminRoutes(app: FastifyInstance, deps: AdminRouteDeps): void {
  const { slot } = deps;

  app.post("/sleep", async (request) => {
    const raw = (request.query as Record<string, unknown>).level;
    const level = raw === undefined ? 1 : Number(raw);
    if (level !== 1 && level !== 2) throw invalidRequest("level", `must be 1 or 2 (got ${String(raw)})`);
    await slot.sleep(level);
    return { is_sleeping: slot.sleeping, level: slot.level };
  });

  app.post("/wake_up", async () => {
    await slot.wakeUp();
    return { is_sleeping: slot.sleeping };
  });

  app.get("/is_sleeping", async () => ({ is_sleeping: slot.sleeping }));

  app.post("/v1/load_weights", async (request) => {
    const parsed = LoadWeightsSchema.safeParse(request.body);
    if (!parsed.success) throw fromZodError(parsed.error);
    const b = parsed.data;
    return slot.loadWeights(b.model_path, b.policy_version, b.in_flight ?? deps.defaultInFlight);
  });

  app.get("/v1/policy_version", async () => ({
    policy_version: slot.policyVersion,
    model_path: slot.modelPath,
    is_sleeping: slot.sleeping,
  }));
}
