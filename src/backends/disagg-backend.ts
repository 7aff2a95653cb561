// One backend over Arbor engines serving prefill/decode roles (engine/http/kv-handoff.ts): each call
// runs where disagg-placement.ts finds it cheapest — whole on a mixed engine, or prefilled on a prefill
// engine (`kv_transfer_params: {do_remote_decode: true}`, one token and the prompt's KV saved to the
// pool) and decoded on a decode engine with the key and first token it answered. The answer is the
// decode engine's, identical to a mixed engine's for a seeded call. Load is the calls this backend has
// in flight on each engine; the KV's bytes per token are learnt from the prefill answers.
// In the config it is a backend `type: disagg` listing its engines by URL (registry.ts builds it).
import { ArborError } from "../core/errors.js";
import {
  BackendProtocolError,
  type BackendMetrics,
  type BackendReply,
  type GenerateRequest,
  type GenerateResult,
  type GenerateStream,
  type TokenBackend,
  type TokenizeRequest,
  type TokenizeResult,
} from "./backend.js";
import { choosePlacement, DisaggCostOptionsSchema, type DisaggCostOptions, type Placement } from "./disagg-placement.js";

export interface DisaggBackendOptions {
  name: string;
  /** Arbor engines with role prefill (and a kvPool). */
  prefill: readonly TokenBackend[];
  /** Arbor engines with role decode, on the same pool. */
  decode: readonly TokenBackend[];
  /** Engines with role mixed the call may run on whole (optional). */
  mixed?: readonly TokenBackend[];
  cost?: DisaggCostOptions;
}

/** What the backend decided for its calls so far (tests, logs). */
export interface DisaggStats {
  mixed: number;
  split: number;
  /** Split calls the prefill alone answered (the first token ended them). */
  endedAtPrefill: number;
  /** Split (non-streamed) calls whose decode engine loaded the prompt's KV from the pool, and those it recomputed. */
  kvLoaded: number;
  kvRecomputed: number;
  /** Mean KV bytes per prompt token seen in prefill answers (the cost model's estimate). */
  kvBytesPerToken: number;
}

type Role = "prefill" | "decode" | "mixed";

/** Create the backend; see the file header. */
export function createDisaggBackend(opts: DisaggBackendOptions): TokenBackend & { stats(): DisaggStats; lastPlacement(): Placement | undefined } {
  const cost = DisaggCostOptionsSchema.parse(opts.cost ?? {});
  const mixed = opts.mixed ?? [];
  if (opts.prefill.length === 0 !== (opts.decode.length === 0)) {
    throw new ArborError(`backend '${opts.name}': prefill and decode engines come in pairs (got ${opts.prefill.length} prefill, ${opts.decode.length} decode)`, "config");
  }
  if (opts.prefill.length === 0 && mixed.length === 0) throw new ArborError(`backend '${opts.name}': needs prefill and decode engines (or mixed ones)`, "config");
  const members: Record<Role, readonly TokenBackend[]> = { prefill: opts.prefill, decode: opts.decode, mixed };
  const inFlight: Record<Role, number[]> = { prefill: opts.prefill.map(() => 0), decode: opts.decode.map(() => 0), mixed: mixed.map(() => 0) };
  const counters = { mixed: 0, split: 0, endedAtPrefill: 0, kvLoaded: 0, kvRecomputed: 0 };
  let bytesSeen = 0;
  let tokensSeen = 0;
  let last: Placement | undefined;
  const first = (opts.prefill[0] ?? mixed[0]) as TokenBackend;

  const kvBytesPerToken = (): number => (tokensSeen > 0 ? bytesSeen / tokensSeen : cost.kvBytesPerToken);

  /** Run `fn` on engine `i` of `role`, counted in flight meanwhile. */
  async function on<T>(role: Role, i: number, fn: (b: TokenBackend) => Promise<T>): Promise<T> {
    const counts = inFlight[role];
    counts[i] = (counts[i] ?? 0) + 1;
    try {
      return await fn(members[role][i] as TokenBackend);
    } finally {
      counts[i] = (counts[i] ?? 1) - 1;
    }
  }

  function place(promptTokens: number): Placement {
    last = choosePlacement(promptTokens, inFlight, kvBytesPerToken(), cost);
    counters[last.kind]++;
    return last;
  }

  /** The prefill answer's handoff, checked; undefined when the prefill answer is the whole one. */
  function handoffOf(engine: TokenBackend, kv: unknown): { kv_key: string; first_token: unknown } | undefined {
    const k = kv as { done?: unknown; kv_key?: unknown; first_token?: unknown; kv_bytes?: unknown; kv_tokens?: unknown } | undefined;
    if (typeof k !== "object" || k === null || typeof k.done !== "boolean") {
      throw new BackendProtocolError(engine.name, engine.url, "answered a prefill without kv_transfer_params.done (is it an Arbor engine with role prefill and a kvPool?)");
    }
    if (k.done) {
      counters.endedAtPrefill++;
      return undefined;
    }
    if (typeof k.kv_key !== "string" || typeof k.first_token !== "object" || k.first_token === null) {
      throw new BackendProtocolError(engine.name, engine.url, "answered a prefill without kv_transfer_params.kv_key and first_token");
    }
    if (typeof k.kv_bytes === "number" && typeof k.kv_tokens === "number" && k.kv_tokens > 0) {
      bytesSeen += k.kv_bytes;
      tokensSeen += k.kv_tokens;
    }
    return { kv_key: k.kv_key, first_token: k.first_token };
  }

  const decodeParams = (h: { kv_key: string; first_token: unknown }): Record<string, unknown> => ({ do_remote_prefill: true, kv_key: h.kv_key, first_token: h.first_token });

  /** Count what the decode engine did with the KV; the answer goes on as a plain engine's (no kv_transfer_params). */
  function decoded(r: GenerateResult): GenerateResult {
    if (r.kvTransferParams?.kv_loaded === true) counters.kvLoaded++;
    else counters.kvRecomputed++;
    const { kvTransferParams: _kv, ...plain } = r;
    return plain;
  }

  async function generate(req: GenerateRequest): Promise<GenerateResult> {
    const where = place(req.promptTokenIds.length);
    if (where.kind === "mixed") return on("mixed", where.engine, (b) => b.generate(req));
    const pre = await on("prefill", where.prefill, (b) => b.generate({ ...req, kvTransferParams: { do_remote_decode: true } }));
    const h = handoffOf(members.prefill[where.prefill] as TokenBackend, pre.kvTransferParams);
    if (!h) return withoutKv(pre);
    return decoded(await on("decode", where.decode, (b) => b.generate({ ...req, kvTransferParams: decodeParams(h) })));
  }

  async function generateStream(req: GenerateRequest): Promise<GenerateStream> {
    const where = place(req.promptTokenIds.length);
    const streamOn = (role: Role, i: number, r: GenerateRequest): Promise<GenerateStream> => {
      const b = members[role][i] as TokenBackend;
      if (!b.generateStream) return Promise.reject(new ArborError(`backend '${b.name}' cannot stream token ids`, "backend_capability"));
      // Counted until the stream is handed over; the caller reads it at its own pace.
      return on(role, i, () => (b.generateStream as (r: GenerateRequest) => Promise<GenerateStream>)(r));
    };
    if (where.kind === "mixed") return streamOn("mixed", where.engine, req);
    const pre = await on("prefill", where.prefill, (b) => b.generate({ ...req, kvTransferParams: { do_remote_decode: true } }));
    const h = handoffOf(members.prefill[where.prefill] as TokenBackend, pre.kvTransferParams);
    if (!h) return finishedStream(withoutKv(pre));
    const stream = await streamOn("decode", where.decode, { ...req, kvTransferParams: decodeParams(h) });
    // A streamed answer carries no kv_transfer_params: the stats count non-streamed decodes only.
    return { deltas: stream.deltas, result: () => withoutKv(stream.result()) };
  }

  /** The OpenAI routes (the gateway's passthrough): the same two steps on request bodies. */
  async function twoStep(route: "chatCompletions" | "completions", body: object, signal?: AbortSignal): Promise<BackendReply> {
    // The prompt's length is unknown before tokenization here: the KV cost counts as a short prompt's.
    const where = place(0);
    if (where.kind === "mixed") return on("mixed", where.engine, (b) => b[route](body, signal));
    const pre = await on("prefill", where.prefill, (b) => b[route]({ ...body, stream: false, kv_transfer_params: { do_remote_decode: true } }, signal));
    if (pre.status !== 200) return pre;
    const h = handoffOf(members.prefill[where.prefill] as TokenBackend, pre.json?.kv_transfer_params);
    if (!h) return pre;
    return on("decode", where.decode, (b) => b[route]({ ...body, kv_transfer_params: decodeParams(h) }, signal));
  }

  const all = (): TokenBackend[] => [...opts.prefill, ...opts.decode, ...mixed];

  return {
    name: opts.name,
    url: first.url,
    ...(first.servedModel !== undefined ? { servedModel: first.servedModel } : {}),
    type: "disagg",
    capabilities: { tokenIds: true, logprobs: true, pauseRestore: false },
    ...(first.toolParser ? { toolParser: first.toolParser } : {}),
    ...(first.reasoningParser ? { reasoningParser: first.reasoningParser } : {}),
    ...(first.samplingControls ? { samplingControls: first.samplingControls } : {}),
    chatCompletions: (body, signal) => twoStep("chatCompletions", body, signal),
    completions: (body, signal) => twoStep("completions", body, signal),
    models: () => first.models(),
    async health() {
      // Every engine must answer: a pair with a dead half cannot serve its split calls.
      await Promise.all(all().map((b) => b.health()));
    },
    generate,
    generateStream,
    ...(first.tokenize ? { tokenize: (r: TokenizeRequest): Promise<TokenizeResult> => (first.tokenize as (r: TokenizeRequest) => Promise<TokenizeResult>)(r) } : {}),
    ...(first.detokenize ? { detokenize: (ids: number[], signal?: AbortSignal) => (first.detokenize as (i: number[], s?: AbortSignal) => Promise<string>)(ids, signal) } : {}),
    async scrapeMetrics(): Promise<BackendMetrics> {
      return sumMetrics(await Promise.all(all().map((b) => b.scrapeMetrics())));
    },
    stats: () => ({ ...counters, kvBytesPerToken: kvBytesPerToken() }),
    lastPlacement: () => last,
  };
}

function withoutKv(r: GenerateResult): GenerateResult {
  const { kvTransferParams: _kv, ...plain } = r;
  return plain;
}

/** A generation already complete (the prefill's answer ended it), as a stream. */
function finishedStream(r: GenerateResult): GenerateStream {
  return {
    deltas: (async function* () {
      if (r.outputTokenIds.length > 0) yield { ids: r.outputTokenIds, logprobs: r.logprobs, policyVersion: r.policyVersion };
    })(),
    result: () => r,
  };
}

/** The engines' load together: counts and capacities summed, usage averaged over those that report it. */
function sumMetrics(ms: readonly BackendMetrics[]): BackendMetrics {
  const sum = (f: (m: BackendMetrics) => number | null): number | null => {
    const xs = ms.map(f).filter((x): x is number => x !== null);
    return xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0);
  };
  const usages = ms.map((m) => m.kvUsage).filter((x): x is number => x !== null);
  return {
    running: sum((m) => m.running),
    waiting: sum((m) => m.waiting),
    kvUsage: usages.length === 0 ? null : usages.reduce((a, b) => a + b, 0) / usages.length,
    kvCapacityTokens: sum((m) => m.kvCapacityTokens),
    prefixCacheQueries: sum((m) => m.prefixCacheQueries),
    prefixCacheHits: sum((m) => m.prefixCacheHits),
    prefixCacheHitRate: null,
  };
}
