// The draft service over HTTP (so several engines share a group's tree): a Fastify plugin, mounted under
// a prefix (default /v1/specdec) of an engine's server or a server of its own. JSON in snake_case:
//   POST {prefix}/groups  {group_id, ttl_ms}                           → {group_id, expires_at, evicted_group?}
//   POST {prefix}/update  {group_id, request_id, prev_len, new_tokens} → {length, appended, evicted}
//   POST {prefix}/fetch   {group_ids, since}                           → {cursor, groups: [{group_id, created_at,
//                                                                          sequences: [{request_id, start, tokens}], evicted}], missing}
//   POST {prefix}/draft   {group_id, context, max_spec_tokens?, max_spec_factor?, max_spec_offset?,
//                          min_token_prob?, top_k?}                    → {token_ids, parents, probs, score, match_len}
// Errors have OpenAI's shape with the field in `param` (snake_case): 400 for a bad field, a gap or a
// budget, 404 for an unknown group, 409 for tokens that differ from those recorded.
import type { FastifyInstance, FastifyPluginAsync } from "fastify";
import { z } from "../../core/zod.js";
import { ArborError } from "../../core/errors.js";
import { fromZodError, HttpError } from "../openai-errors.js";
import type { DraftService } from "./draft-service.js";

export const DEFAULT_DRAFT_SERVICE_PREFIX = "/v1/specdec";

const id = z.string({ error: "must be a string" }).min(1, { error: "must not be empty" });
const count = z.number({ error: "must be a number" }).int({ error: "must be an integer" }).min(0, { error: "must be >= 0" });
const tokens = z.array(count, { error: "must be an array of token ids" });

const RegisterSchema = z.object({ group_id: id, ttl_ms: count });
const UpdateSchema = z.object({ group_id: id, request_id: id, prev_len: count, new_tokens: tokens });
const FetchSchema = z.object({ group_ids: z.array(id, { error: "must be an array of group ids" }), since: count });
const DraftSchema = z.object({
  group_id: id,
  context: tokens,
  max_spec_tokens: count.nullish(),
  max_spec_factor: z.number({ error: "must be a number" }).nullish(),
  max_spec_offset: z.number({ error: "must be a number" }).nullish(),
  min_token_prob: z.number({ error: "must be a number" }).nullish(),
  top_k: z.number({ error: "must be a number" }).int({ error: "must be an integer" }).min(1, { error: "must be >= 1" }).nullish(),
});

function snake(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

const STATUS: Record<string, number> = { not_found: 404, conflict: 409 };

/** The service's errors as HTTP errors; an ArborError's leading field name becomes `param`, in snake_case. */
function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof ArborError) {
    const m = /^([A-Za-z]+)((?:\[\d+\])*): /.exec(err.message);
    const param = m ? `${snake(m[1] as string)}${m[2] ?? ""}` : null;
    const message = m ? `${param}: ${err.message.slice(m[0].length)}` : err.message;
    return new HttpError(STATUS[err.code] ?? 400, message, "invalid_request_error", param, err.code);
  }
  const e = err as { statusCode?: number; message?: string; code?: string };
  if (typeof e.statusCode === "number" && e.statusCode >= 400 && e.statusCode < 500) {
    return new HttpError(e.statusCode, `request body: ${e.message ?? "invalid"}`, "invalid_request_error", null, e.code ?? null);
  }
  return new HttpError(500, `internal error: ${e.message ?? String(err)}`, "server_error", null, "internal_error");
}

function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw fromZodError(parsed.error);
  return parsed.data;
}

/** The routes, as an encapsulated plugin (its error handler applies to its own routes only). */
export const draftServiceRoutes: FastifyPluginAsync<{ service: DraftService }> = async (app, { service }) => {
  app.setErrorHandler((err, _req, reply) => {
    const h = toHttpError(err);
    return reply.code(h.status).headers(h.headers).send(h.body());
  });

  app.post("/groups", async (req) => {
    const b = parse(RegisterSchema, req.body);
    const r = await service.registerGroup(b.group_id, b.ttl_ms);
    return { group_id: r.groupId, expires_at: r.expiresAt, ...(r.evictedGroup === undefined ? {} : { evicted_group: r.evictedGroup }) };
  });

  app.post("/update", async (req) => {
    const b = parse(UpdateSchema, req.body);
    return service.update(b.group_id, b.request_id, b.prev_len, b.new_tokens);
  });

  app.post("/fetch", async (req) => {
    const b = parse(FetchSchema, req.body);
    const r = await service.fetch(b.group_ids, b.since);
    return {
      cursor: r.cursor,
      groups: r.groups.map((g) => ({
        group_id: g.groupId,
        created_at: g.createdAt,
        sequences: g.sequences.map((s) => ({ request_id: s.requestId, start: s.start, tokens: s.tokens })),
        evicted: g.evicted,
      })),
      missing: r.missing,
    };
  });

  app.post("/draft", async (req) => {
    const b = parse(DraftSchema, req.body);
    const d = await service.draft({
      groupId: b.group_id,
      context: b.context,
      ...(b.max_spec_tokens == null ? {} : { maxSpecTokens: b.max_spec_tokens }),
      ...(b.max_spec_factor == null ? {} : { maxSpecFactor: b.max_spec_factor }),
      ...(b.max_spec_offset == null ? {} : { maxSpecOffset: b.max_spec_offset }),
      ...(b.min_token_prob == null ? {} : { minTokenProb: b.min_token_prob }),
      ...(b.top_k == null ? {} : { topK: b.top_k }),
    });
    return { token_ids: d.tokens, parents: d.parents, probs: d.probs, score: d.score, match_len: d.matchLen };
  });
};

/** Mount the draft service's routes on `app` under `prefix`. */
export async function registerDraftServiceRoutes(app: FastifyInstance, service: DraftService, prefix = DEFAULT_DRAFT_SERVICE_PREFIX): Promise<void> {
  await app.register(draftServiceRoutes, { service, prefix });
}
