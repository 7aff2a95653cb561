// Admission of an inference call: which program it belongs to (path, header or body, which must
// agree), whether its caller may call as that program, and a slot of the program's limits.
import type { FastifyRequest } from "fastify";
import type { CredentialHeaders } from "./auth/gateway-auth.js";
import type { GatewayContext } from "./gateway-context.js";
import { InvalidRequestError } from "./http-errors.js";
import type { PreparedRequest } from "./openai-request.js";

/** Header naming the program when the client uses the plain /v1 routes. */
export const PROGRAM_HEADER = "x-arbor-program";

/**
 * Header of Arbor's black-box proxy: the output budget the agent asked for before the proxy lowered it to
 * agent.maxTokensPerCall (the call records it as clamped, asked → granted). The proxy strips it from what agents send.
 */
export const MAX_TOKENS_ASKED_HEADER = "x-arbor-max-tokens-asked";

export type ProgramRequest = FastifyRequest<{ Params: { programId?: string } }>;

/** Resolve the call's program, check its caller, and hold a slot of its limits while `serve` runs. */
export async function admitted<T>(ctx: GatewayContext, req: ProgramRequest, prepared: PreparedRequest, serve: (programId: string) => Promise<T>): Promise<T> {
  const programId = callerProgram(ctx, req, prepared.bodyProgramId);
  const asked = maxTokensAsked(req.headers[MAX_TOKENS_ASKED_HEADER]);
  if (asked !== undefined) prepared.maxTokensAsked = asked;
  const done = ctx.limiter.admit(programId);
  try {
    return await serve(programId);
  } finally {
    done();
  }
}

/** The request's program (path, header or body field `bodyId`, which must agree), once its caller may call as it. */
export function callerProgram(ctx: GatewayContext, req: ProgramRequest, bodyId: string | undefined): string {
  const programId = programIdOf(req, bodyId);
  ctx.auth?.requireCaller(req.headers as CredentialHeaders, programId);
  return programId;
}

/** The proxy's header: a positive integer, sent once. */
function maxTokensAsked(value: string | string[] | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Array.isArray(value) || !/^[1-9][0-9]{0,9}$/.test(value) ? NaN : Number(value);
  if (!Number.isSafeInteger(n)) throw new InvalidRequestError(MAX_TOKENS_ASKED_HEADER, `must be one positive integer, got ${JSON.stringify(value)}`);
  return n;
}

function programIdOf(req: ProgramRequest, bodyId: string | undefined): string {
  const header = programHeader(req.headers[PROGRAM_HEADER]);
  const given = [
    ["path", req.params.programId],
    [`header '${PROGRAM_HEADER}'`, header],
    ["body field program_id", bodyId],
  ].filter((g): g is [string, string] => g[1] !== undefined && g[1] !== "");
  const first = given[0];
  if (!first) {
    throw new InvalidRequestError(
      "program_id",
      `missing program id: call /p/<program-id>/v1/..., or send header '${PROGRAM_HEADER}: <program-id>' (or body field program_id)`,
    );
  }
  const other = given.find((g) => g[1] !== first[1]);
  if (other) {
    throw new InvalidRequestError("program_id", `${first[0]} says '${first[1]}' but ${other[0]} says '${other[1]}'`);
  }
  return first[1];
}

/**
 * The program header's value. Node reads header bytes as latin1, so a UTF-8 id would be echoed
 * garbled in every message that names it: a non-ASCII value is refused, naming it as sent (decoded as UTF-8).
 */
export function programHeader(value: string | string[] | undefined): string | undefined {
  if (Array.isArray(value)) throw new InvalidRequestError(PROGRAM_HEADER, "send the header once (one program id)");
  if (value === undefined || !/[^\x20-\x7e]/.test(value)) return value;
  const sent = Buffer.from(value, "latin1").toString("utf8");
  throw new InvalidRequestError(PROGRAM_HEADER, `program ids are 1-256 printable ASCII characters; got '${sent.slice(0, 64)}', which is not printable ASCII`);
}
