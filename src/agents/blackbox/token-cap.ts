// The per-call generation cap of black-box agents (agent.maxTokensPerCall): a black box picks its
// own max_tokens, so the proxy rewrites each inference request's limit field(s) to at most the
// cap, adds the cap where the request names none, or refuses an over-cap request outright.

/** Inference routes of the gateway and the fields that bound what one call generates. */
const LIMIT_FIELDS = {
  "chat/completions": ["max_tokens", "max_completion_tokens"],
  completions: ["max_tokens"],
  responses: ["max_output_tokens"],
  messages: ["max_tokens"],
} as const;

export type InferenceRoute = keyof typeof LIMIT_FIELDS;

/** What to do with a request that asks for more than the cap. */
export type OverCapPolicy = "clamp" | "refuse";

export type CapOutcome =
  | {
      ok: true;
      body: Record<string, unknown>;
      /** Fields lowered to the cap. */
      clamped: string[];
      /** The largest budget the request asked for, when a field was lowered (what the call records as asked). */
      asked?: number;
      /** The field added because the request named no limit. */
      added?: string;
    }
  | { ok: false; field: string; message: string };

/** The inference route a proxied path names (`/p/{id}/v1/<route>`), if any. */
export function inferenceRoute(path: string): InferenceRoute | undefined {
  const m = /\/v1\/(chat\/completions|completions|responses|messages)(?:\?|$)/.exec(path);
  return m ? (m[1] as InferenceRoute) : undefined;
}

/**
 * Bound a parsed request body to `cap` generated tokens. Values that are not numbers are left for
 * the gateway to refuse (it checks every field); null counts as absent, as the gateway reads it.
 */
export function capRequestTokens(route: InferenceRoute, body: Record<string, unknown>, cap: number, policy: OverCapPolicy): CapOutcome {
  const fields = LIMIT_FIELDS[route];
  const out: Record<string, unknown> = { ...body };
  const clamped: string[] = [];
  let asked: number | undefined;
  let named = false;
  for (const field of fields) {
    const v = body[field];
    if (v === undefined || v === null) continue;
    named = true;
    if (typeof v !== "number" || !(v > cap)) continue;
    if (policy === "refuse") {
      return { ok: false, field, message: `${field}: ${v} is above this program's per-call limit of ${cap} tokens (agent.maxTokensPerCall)` };
    }
    out[field] = cap;
    clamped.push(field);
    asked = Math.max(asked ?? 0, v);
  }
  if (named) return asked === undefined ? { ok: true, body: out, clamped } : { ok: true, body: out, clamped, asked };
  const added = fields[0];
  out[added] = cap;
  return { ok: true, body: out, clamped, added };
}
