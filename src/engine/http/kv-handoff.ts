// Prefill/decode disaggregation on the engine's OpenAI surface (issue 16; Forge, Mooncake, DistServe):
// an engine serves the role `prefill`, `decode` or `mixed`, and a prompt's KV goes from a prefill
// engine to a decode engine through the global KV pool (kv/state-pool.ts, Redis). The HTTP shape
// follows vLLM's disaggregated serving (`kv_transfer_params` in the request and the answer) on
// /v1/completions and /v1/chat/completions alike:
//
// 1. The client (a proxy, the gateway) sends the request to a prefill engine with
//    `kv_transfer_params: {do_remote_decode: true}`. The engine evaluates the prompt, samples the
//    first token as a mixed engine would (same seed, same position), saves the prompt's KV to the pool
//    under a fresh key and answers a normal completion of that one token with
//    `kv_transfer_params: {done: false, kv_key, kv_tokens, kv_bytes, first_token: {id, logprob, top_logprobs}}`.
//    When the first token already ends the request (a stop token, or max_tokens 1), nothing is saved
//    and the answer, with `kv_transfer_params: {done: true}`, is the final one.
// 2. The client sends the same request to a decode engine with
//    `kv_transfer_params: {do_remote_prefill: true, kv_key, first_token}`. The engine takes the state
//    out of the pool, loads it into a sequence, feeds the first token and generates the rest with the
//    request's budget and controls shifted by that token; it answers the whole completion (first token
//    included) as a mixed engine would, with `kv_transfer_params: {kv_key, kv_loaded, kv_tokens}`. A
//    state that is missing or cannot be loaded is recomputed (same tokens; `kv_loaded: false` and
//    `kv_miss_reason` say why).
//
// The tokens and logprobs equal a mixed engine's for a seeded request: sampling is position-keyed
// (sampling.ts), the prompt's KV is the very state the prefill engine computed, and the first token
// is evaluated alone as a mixed engine's first decode step is. A prefill engine refuses requests
// without `do_remote_decode`, a decode engine those without `do_remote_prefill`; a mixed engine with
// a pool serves plain requests and either half.
import { randomUUID } from "node:crypto";
import { z } from "../../core/zod.js";
import { ArborError } from "../../core/errors.js";
import type { Executor, GenerateRequest, GenerateResult, KvTransfer } from "../executor.js";
import type { KvStatePool } from "../kv/state-pool.js";
import { invalidRequest, HttpError } from "../openai-errors.js";
import { ENGINE_ROLES, type EngineRole } from "../engine-role.js";
import { StopRule, type SampledToken, type SamplingControls } from "../sampling.js";

// What an engine serves: prompts for another engine, decodes from another's prompt KV, or whole requests
// (defined in engine-role.ts, which `arbor serve engine --role` checks without loading this module).
export { ENGINE_ROLES, type EngineRole } from "../engine-role.js";

const tokenLogprob = z.object({ id: z.number().int().min(0), logprob: z.number() }).strict();

/** The request's `kv_transfer_params` (see the file header). */
export const KvTransferParamsSchema = z
  .object({
    do_remote_decode: z.boolean().nullish(),
    do_remote_prefill: z.boolean().nullish(),
    kv_key: z.string().min(1).max(512).nullish(),
    first_token: tokenLogprob.extend({ top_logprobs: z.array(tokenLogprob).max(20).nullish() }).strict().nullish(),
  })
  .strict()
  .nullish();
export type KvTransferParams = z.infer<typeof KvTransferParamsSchema>;

/** How one request is served: whole, as a prefill for another engine, or as the decode of another's prefill. */
export type HandoffMode = { kind: "whole" } | { kind: "prefill" } | { kind: "decode"; key: string; first: SampledToken };

/** A generation's result and, for the halves of a handoff, the answer's `kv_transfer_params`. */
export interface HandoffResult extends GenerateResult {
  kvTransfer?: Record<string, unknown>;
}

export interface KvHandoffOptions {
  engine: string;
  role: EngineRole;
  /** The global KV pool; required for the prefill and decode roles. */
  pool?: KvStatePool;
  /** The engine's end-of-generation tokens (a first token among them ends the request). */
  stopTokenIds: readonly number[];
}

/** The engine's side of prefill/decode disaggregation; see the file header. */
export class KvHandoff {
  readonly role: EngineRole;
  private readonly pool: KvStatePool | undefined;
  private readonly engine: string;
  private readonly stopTokenIds: readonly number[];

  constructor(opts: KvHandoffOptions) {
    if (!ENGINE_ROLES.includes(opts.role)) throw new ArborError(`engine ${opts.engine}: role must be "prefill", "decode" or "mixed", got ${JSON.stringify(opts.role)}`, "config");
    if (opts.role !== "mixed" && !opts.pool) {
      throw new ArborError(`engine ${opts.engine}: role "${opts.role}" needs kvPool (the global KV pool its prompts' KV goes through)`, "config");
    }
    this.role = opts.role;
    this.pool = opts.pool;
    this.engine = opts.engine;
    this.stopTokenIds = opts.stopTokenIds;
  }

  /** Check an executor can hand KV over (at start: a role other than mixed needs one). */
  checkExecutor(executor: Executor, kind: string): void {
    if ((this.role !== "mixed" || this.pool) && !executor.kvTransfer) {
      throw new ArborError(`engine ${this.engine}: role "${this.role}" with a kvPool needs an executor that holds real KV ("llamacpp-scheduled"), got "${kind}"`, "config");
    }
  }

  /** The request's mode under this engine's role; 400 naming `kv_transfer_params` when it does not fit. */
  mode(params: KvTransferParams, stream: boolean, vocabSize: number): HandoffMode {
    const p = params ?? {};
    const param = "kv_transfer_params";
    if (p.do_remote_decode && p.do_remote_prefill) throw invalidRequest(param, "do_remote_decode and do_remote_prefill exclude each other");
    if (!p.do_remote_decode && !p.do_remote_prefill) {
      if (params != null) throw invalidRequest(param, "must set do_remote_decode (prefill here) or do_remote_prefill (decode here)");
      if (this.role === "prefill") throw invalidRequest(param, `engine ${this.engine} serves the prefill role: set kv_transfer_params.do_remote_decode and send the answer's kv_transfer_params to a decode engine`);
      if (this.role === "decode") throw invalidRequest(param, `engine ${this.engine} serves the decode role: a request needs kv_transfer_params {do_remote_prefill, kv_key, first_token} from a prefill engine`);
      return { kind: "whole" };
    }
    if (!this.pool) throw invalidRequest(param, `engine ${this.engine} has no kvPool configured, so it cannot hand KV over`);
    if (p.do_remote_decode) {
      if (this.role === "decode") throw invalidRequest(`${param}.do_remote_decode`, `engine ${this.engine} serves the decode role, not prefill`);
      if (stream) throw invalidRequest("stream", "is not supported with kv_transfer_params.do_remote_decode (a prefill answers one token)");
      return { kind: "prefill" };
    }
    if (this.role === "prefill") throw invalidRequest(`${param}.do_remote_prefill`, `engine ${this.engine} serves the prefill role, not decode`);
    if (p.kv_key == null) throw invalidRequest(`${param}.kv_key`, "is required with do_remote_prefill (the key a prefill engine answered)");
    const f = p.first_token;
    if (f == null) throw invalidRequest(`${param}.first_token`, "is required with do_remote_prefill (the token a prefill engine answered)");
    if (f.id >= vocabSize) throw invalidRequest(`${param}.first_token.id`, `token id ${f.id} is outside the vocabulary (size ${vocabSize})`);
    return { kind: "decode", key: p.kv_key, first: { id: f.id, logprob: f.logprob, top: (f.top_logprobs ?? []).map((t) => ({ id: t.id, logprob: t.logprob })) } };
  }

  /**
   * Generate `req` in `mode`: `generate` runs a request on the lease's executor and `transfer` is the
   * serving executor's KV handoff.
   */
  async generate(mode: HandoffMode, req: GenerateRequest, generate: (r: GenerateRequest) => Promise<GenerateResult>, transfer: KvTransfer | undefined): Promise<HandoffResult> {
    if (mode.kind === "whole") return generate(req);
    if (!transfer || !this.pool) throw new HttpError(501, `engine ${this.engine}: this executor cannot hand KV over (use "llamacpp-scheduled")`, "not_implemented_error", null, "not_implemented");
    return mode.kind === "prefill" ? this.prefill(req, generate, transfer, this.pool) : this.decode(mode, req, generate, transfer, this.pool);
  }

  private async prefill(req: GenerateRequest, generate: (r: GenerateRequest) => Promise<GenerateResult>, transfer: KvTransfer, pool: KvStatePool): Promise<HandoffResult> {
    const key = `kv-${randomUUID()}`;
    // Registered before the request: its context is saved in the very step that frees its sequence.
    const exported = transfer.exportState(key);
    let result: GenerateResult;
    try {
      // One token, under a program id of its own so that the prompt's context can be exported.
      result = await generate({ ...req, maxTokens: 1, controls: shiftControls(req.controls, 0, 1), programId: key });
    } catch (err) {
      transfer.discardState(key);
      await exported.catch(() => undefined);
      throw err;
    }
    const state = await exported;
    const first = result.tokens[0];
    if (!first || result.finishReason !== "length" || req.maxTokens === 1) {
      // The first token ends the request: this answer is the whole one, and no KV needs to move.
      return { ...result, kvTransfer: { done: true } };
    }
    if (!state) throw new ArborError(`engine ${this.engine}: the prompt's KV was not held after its prefill`, "engine");
    const saved = await pool.put(key, state.entry.tokenIds, state.entry.compat, state.data);
    return {
      ...result,
      kvTransfer: {
        done: false,
        kv_key: key,
        kv_tokens: saved.tokenIds.length,
        kv_bytes: saved.bytes,
        first_token: { id: first.id, logprob: first.logprob, top_logprobs: first.top },
      },
    };
  }

  private async decode(
    mode: { key: string; first: SampledToken },
    req: GenerateRequest,
    generate: (r: GenerateRequest) => Promise<GenerateResult>,
    transfer: KvTransfer,
    pool: KvStatePool,
  ): Promise<HandoffResult> {
    const { key, first } = mode;
    const programId = req.programId ?? key;
    let missReason: string | undefined;
    let stateTokens = 0;
    let imported = false;
    try {
      // Taken: a handed-off state is loaded by one engine, and leaves the pool's budget at once.
      const got = await pool.get(key, { take: true });
      if (!got) missReason = `no state under ${key} in the KV pool (never saved, evicted, or taken by another engine)`;
      else {
        stateTokens = got.entry.tokenIds.length;
        await transfer.importState(programId, got.entry.tokenIds, got.entry.compat, got.data);
        imported = true;
      }
    } catch (err) {
      // A pool that fails costs a recompute, not the request; the answer says why.
      missReason = (err as Error).message;
    }
    try {
      const stop = new StopRule(this.stopTokenIds, req.controls ?? {});
      // A stream gets the prefill's token first, whether or not more follow.
      req.onToken?.(first);
      let result: GenerateResult;
      if (stop.stopsAt(first.id, 1)) result = { tokens: [first], finishReason: "stop", stopTokenId: first.id };
      else if (req.maxTokens === 1) result = { tokens: [first], finishReason: "length" };
      else {
        const rest = await generate({
          ...req,
          promptTokenIds: [...req.promptTokenIds, first.id],
          maxTokens: req.maxTokens - 1,
          controls: shiftControls(req.controls, 1, req.maxTokens - 1),
          programId,
        });
        result = { ...rest, tokens: [first, ...rest.tokens] };
      }
      // A loaded state left L2 for a sequence; one still there was not used.
      const loaded = imported && !transfer.discardState(programId);
      if (imported && !loaded) missReason = "the state was not loaded (a sequence already held a longer prefix, or llama.cpp refused it)";
      return { ...result, kvTransfer: { kv_key: key, kv_loaded: loaded, kv_tokens: stateTokens, ...(missReason ? { kv_miss_reason: missReason } : {}) } };
    } finally {
      if (imported) transfer.discardState(programId);
    }
  }
}

/** The controls of the request's remainder after `done` output tokens, within a budget of `maxTokens`. */
function shiftControls(c: SamplingControls | undefined, done: number, maxTokens: number): SamplingControls | undefined {
  if (!c || c.minTokens === undefined) return c;
  return { ...c, minTokens: Math.min(Math.max(0, c.minTokens - done), maxTokens) };
}
