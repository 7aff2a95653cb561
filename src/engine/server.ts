// The built-in engine's OpenAI-compatible HTTP surface (fastify): chat and text completions (plain
// or streamed as SSE) with token ids and logprobs in vLLM's shapes, /tokenize, /v1/models, /health,
// vLLM-named Prometheus metrics, sleep/wake-up and weight switches. A thin shell: validation and
// formatting here, token generation in the executor, the serving version in the ExecutorSlot.
// Arbor extensions: `policy_version` on every answer and chunk (the version of its last tokens), and
// with `return_token_ids` a choice's `token_policy_versions`, one per output token: a request
// resumed across a weight switch (`in_flight: "resume"`) has old-version tokens, then new ones.
// Prefill/decode roles (`role`, `kvPool`): `kv_transfer_params` in a request and its answer hand a
// prompt's KV from a prefill engine to a decode engine through the global KV pool (http/kv-handoff.ts).
// With a pool and no L3 store of its own, the pool is the engine's L3 tier of paused programs
// (kv/pooled-state-tier.ts): a program paused to L3 here can be restored on any engine of the pool.
import { randomUUID } from "node:crypto";
import Fastify, { type FastifyInstance, type FastifyReply } from "fastify";
import type { Clock } from "../core/clock.js";
import { ArborError, CapacityError } from "../core/errors.js";
import { registerServiceProbes, type ServiceProbes } from "../core/service-probes.js";
import { fastifyHttpLimitOptions, limitConnections, resolveHttpLimits, type HttpLimits } from "../core/http-limits.js";
import { realClock } from "../core/real-clock.js";
import { Rng } from "../core/rng.js";
import { ChatTemplateError } from "../model/chat-format.js";
import { Vocab } from "../model/vocab.js";
import { promptEnding, renderChatPrompt, type ChatParsers } from "./chat-prompt.js";
import { EngineMetrics } from "./engine-metrics.js";
import type { Executor, GenerateResult } from "./executor.js";
import { registerAdminRoutes } from "./http/admin-routes.js";
import { registerProgramRoutes } from "./http/program-routes.js";
import { KvHandoff, type EngineRole, type HandoffResult, type KvTransferParams } from "./http/kv-handoff.js";
import { PooledStateTier } from "./kv/pooled-state-tier.js";
import type { KvStatePool } from "./kv/state-pool.js";
import { ExecutorSlot, type InFlightPolicy, type SlotLease } from "./http/executor-slot.js";
import { SseWriter } from "./http/sse-writer.js";
import { StreamChunker, type Chunk, type StreamSpec } from "./http/stream-chunks.js";
import { registerTokenizeRoutes } from "./http/tokenize-routes.js";
import { checkChatPromptFits, checkTextPromptFits, registerRequestLimits } from "./http/request-limits.js";
import { ScheduledExecutor } from "./core/scheduled-executor.js";
import { executorRegistry, type ExecutorRegistry, type ExecutorSpec } from "./executor-registry.js";
import { PositionKeyedRng } from "./position-keyed-rng.js";
import type { KvStateTier } from "./kv/state-tier.js";
import { fromZodError, HttpError, invalidRequest } from "./openai-errors.js";
import {
  ChatCompletionRequestSchema,
  CompletionRequestSchema,
  toChatMessages,
  toSamplingControls,
  type ChatCompletionRequest,
  type CompletionRequest,
} from "./openai-schemas.js";
import { StopRule, type SampledToken, type SamplingControls } from "./sampling.js";
import { chatLogprobs, completionLogprobs, outputText, stopReason, usage } from "./openai-responses.js";
import { chatAnswer, ChatAnswerStream, filterToolCallChunk, modelParsers } from "./openai-tools.js";
import type { LlamaGpu } from "./llama-runtime.js";
import type { SpeculativeOptions } from "./specdec/speculative-options.js";
import { GroupDraftService } from "./specdec/group-draft-service.js";
import { registerDraftServiceRoutes } from "./specdec/draft-service-routes.js";
import { checkSameVocabulary, resolveServedModel, type ServedModel } from "./served-model.js";
import { AbortedError } from "./sequence-pool.js";
import { fastifyLogger } from "../core/logger.js";
import type { Logger } from "pino";

export interface EngineServerOptions {
  /** Engine name (logs, errors). */
  name: string;
  /** Structured logs (pino, core/logger.ts): Fastify's, requests at debug; none when absent. */
  logger?: Logger;
  /**
   * GGUF to load (llama.cpp executors): Arbor's policy, served with Arbor's template and markup, or
   * any model llama.cpp can run, served with its own tokenizer, chat template and stop tokens.
   */
  modelPath: string;
  /** Version of the weights at `modelPath`, reported in every response. */
  policyVersion: number;
  /** Sequences decoded together (continuous batching width). */
  sequences: number;
  /** Context length of one sequence, in tokens (prompt + output). */
  contextSize: number;
  /** Requests that may wait for a sequence before the engine answers 429. */
  maxWaiting: number;
  host?: string;
  /** 0 = an ephemeral port. */
  port?: number;
  /** The `model` name clients use (default "arbor-tiny"). */
  servedModelName?: string;
  /** llama.cpp build of the llama.cpp executors: false = CPU (default), "auto" = a GPU build where installed. */
  gpu?: LlamaGpu;
  /** Tool-call parser of chat answers (registry name, e.g. "hermes"; default Arbor's markup). */
  toolParser?: string;
  /** Reasoning parser of chat answers (registry name, e.g. "think"; default none). */
  reasoningParser?: string;
  /** A Jinja chat template that replaces the model's own (non-Arbor models); `source` names it in errors. */
  chatTemplate?: { template: string; source: string };
  /** Seed of the engine's Rng, which seeds requests that bring no `seed` of their own. */
  seed?: number;
  clock?: Clock;
  /** F32 KV cache for trainer-exact logprobs (default true); see LlamaCppExecutorOptions. */
  exactKv?: boolean;
  /** Who draws the tokens of the `llamacpp` executor (default "arbor"); see LlamaCppExecutorOptions.sampler. */
  sampler?: "arbor" | "llama.cpp";
  /**
   * What produces tokens (default "llamacpp", the v0 executor: one request per sequence, no
   * scheduler). "llamacpp-scheduled" runs the vLLM-style scheduler (continuous batching, chunked
   * prefill, paged KV with prefix cache, preemption) over llama.cpp: same tokens, logprobs equal to
   * ~1e-8 (prefix reuse changes llama.cpp's batch shapes). "costmodel" serves the modelled timing of
   * `costProfile` with random tokens (load tests of the gateway at scale).
   */
  executorKind?: EngineExecutorKind;
  /** Where `executorKind` is looked up (default: the built-in kinds, executor-registry.ts). */
  executorRegistry?: ExecutorRegistry;
  /** Cost profile name for `executorKind: "costmodel"` (see costmodel/profile.ts). */
  costProfile?: string;
  /** Use this executor instead of loading `modelPath` (its `tokenizer`, or Arbor's vocabulary without one). */
  executor?: Executor;
  /**
   * Loads a GGUF into a new executor for /v1/load_weights and /wake_up (default: a llama.cpp
   * executor with the options above).
   */
  loadExecutor?: (modelPath: string) => Promise<Executor>;
  /** What in-flight requests do on a weight switch when the request names no `in_flight` (default "finish"). */
  inFlightOnWeightSwitch?: InFlightPolicy;
  /** Order of waiting requests on scheduled executors (vLLM --scheduling-policy, default "fcfs"). */
  schedulingPolicy?: "fcfs" | "priority";
  /** Byte budget of a scheduled llama.cpp engine's own L2 store of paused programs (default 256 MiB). */
  l2CapacityBytes?: number;
  /** Speculative decoding on a scheduled llama.cpp engine (engine/specdec/; off when absent). */
  speculative?: SpeculativeOptions;
  /**
   * The L3 store of paused programs, shared by the engines of this process (left open on close).
   * Without it, an engine with a `kvPool` uses the pool as its L3 (shared across processes).
   */
  l3Store?: KvStateTier;
  /**
   * What the engine serves (default "mixed": whole requests): "prefill" evaluates prompts and hands
   * their KV to decode engines through `kvPool`; "decode" generates from such KV (http/kv-handoff.ts).
   */
  role?: EngineRole;
  /** The global KV pool (kv/state-pool.ts) prompts' KV goes through; needed by the prefill and decode roles. Closed with the engine. */
  kvPool?: KvStatePool;
  /** Time to receive a request and open connections at most (default DEFAULT_HTTP_LIMITS: 60 s, 20 s for headers, 4096). */
  httpLimits?: Partial<HttpLimits>;
}

/** Seconds a client should wait after a 429 (a sequence frees as soon as any request finishes). */
const RETRY_AFTER_S = 1;

/** A built-in executor kind, or one registered in the engine's `executorRegistry`. */
export type EngineExecutorKind = "llamacpp" | "llamacpp-scheduled" | "costmodel" | (string & {});

export interface EngineServer {
  app: FastifyInstance;
  /** The executor serving new requests (changes on a weight switch and on wake-up). */
  readonly executor: Executor;
  /** The serving policy version and its executor; weight switches and sleep go through it. */
  slot: ExecutorSlot;
  /** How the model is served: its tokenizer, chat template and stop tokens (Arbor's for Arbor's vocabulary). */
  readonly served: ServedModel;
  metrics: EngineMetrics;
  /** GET /healthz, GET /readyz and the drain (`arbor serve engine`): draining refuses new requests with 503. */
  probes: ServiceProbes;
  /** Base URL (`http://host:port`) once listening. */
  url?: string;
  /** Stop serving and release the model (an injected executor is left open). */
  close(): Promise<void>;
}

export interface ListeningEngineServer extends EngineServer {
  url: string;
}

/**
 * Build the engine: load the policy (once) and wire the routes. The app is not listening; use
 * `app.inject` or {@link startEngineServer}.
 */
export async function createEngineServer(opts: EngineServerOptions): Promise<EngineServer> {
  const clock = opts.clock ?? realClock;
  const servedModelName = opts.servedModelName ?? "arbor-tiny";
  const kind = opts.executorKind ?? "llamacpp";
  // Serves every executor this engine loads (weight switches keep the paused programs' states).
  const l3 = opts.l3Store ?? (opts.kvPool ? new PooledStateTier(opts.kvPool, (line) => console.error(`engine ${opts.name}: ${line}`)) : undefined);
  const ownsL3 = !opts.l3Store && l3 !== undefined;
  const registry = opts.executorRegistry ?? executorRegistry;
  // Suffix speculation's group trees live with the engine, not its executor (a weight switch keeps them),
  // and are served to other engines as /v1/specdec (their `speculative.draftService` points here).
  const groupService = opts.speculative?.method === "suffix" ? new GroupDraftService({ clock }) : undefined;
  const spec: Omit<ExecutorSpec, "modelPath"> = {
    engine: opts.name,
    sequences: opts.sequences,
    contextSize: opts.contextSize,
    maxWaiting: opts.maxWaiting,
    // No stopTokenIds: llama.cpp executors stop at their model's end-of-generation set, others at Arbor's.
    clock,
    vocab: new Vocab(),
    seed: opts.seed ?? 0,
    ...(opts.exactKv !== undefined ? { exactKv: opts.exactKv } : {}),
    ...(opts.sampler !== undefined ? { sampler: opts.sampler } : {}),
    ...(opts.schedulingPolicy ? { schedulingPolicy: opts.schedulingPolicy } : {}),
    ...(opts.l2CapacityBytes !== undefined ? { l2CapacityBytes: opts.l2CapacityBytes } : {}),
    ...(l3 ? { l3 } : {}),
    ...(opts.speculative ? { speculative: opts.speculative } : {}),
    ...(groupService ? { groupService } : {}),
    ...(opts.costProfile !== undefined ? { costProfile: opts.costProfile } : {}),
    ...(opts.gpu !== undefined ? { gpu: opts.gpu } : {}),
  };
  const defaultLoad = (modelPath: string): Promise<Executor> => registry.create(kind, { ...spec, modelPath });
  const load = opts.loadExecutor ?? defaultLoad;
  const ownsExecutor = !opts.executor;
  const executor = opts.executor ?? (await load(opts.modelPath));
  let served: ServedModel;
  try {
    served = await resolveServedModel(executor, opts.modelPath, {
      clock,
      ...(opts.gpu !== undefined ? { gpu: opts.gpu } : {}),
      ...(opts.chatTemplate ? { chatTemplate: opts.chatTemplate } : {}),
    });
  } catch (err) {
    if (ownsExecutor) await executor.close();
    throw err;
  }
  const tok = served.tokenizer;
  const stops = served.stopIds;
  let handoff: KvHandoff;
  try {
    handoff = new KvHandoff({ engine: opts.name, role: opts.role ?? "mixed", stopTokenIds: stops, ...(opts.kvPool ? { pool: opts.kvPool } : {}) });
    handoff.checkExecutor(executor, kind);
  } catch (err) {
    if (ownsExecutor) await executor.close();
    await served.close();
    if (ownsL3) l3?.close();
    await opts.kvPool?.close();
    throw err;
  }
  const stopSet: ReadonlySet<number> = new Set(stops);
  // Configured parsers win over the ones the model's template implies; unknown names fail here, at start.
  const parsers: ChatParsers = { ...served.formats };
  if (opts.toolParser !== undefined) parsers.toolParser = opts.toolParser;
  if (opts.reasoningParser !== undefined) parsers.reasoningParser = opts.reasoningParser;
  const { reasoning } = modelParsers(parsers);
  const slot = new ExecutorSlot({
    executor,
    policyVersion: opts.policyVersion,
    modelPath: opts.modelPath,
    owned: ownsExecutor,
    load,
    check: (e, path) => checkSameVocabulary(served, e, path),
    stopTokenIds: stops,
  });

  const engineRng = new Rng(opts.seed ?? 0);
  let requestCounter = 0;
  const metrics = new EngineMetrics({
    modelName: servedModelName,
    // Prefix-cache, preemption and speculation counters come from the executors (scheduled ones have them).
    // Summed over every executor the slot served: a weight switch between two scrapes loses none of them.
    stats: () => ({ ...slot.stats(), ...slot.counters() }),
    // The paged KV geometry of a scheduled executor; llama.cpp's own cache is per token cell.
    blockSize: executor instanceof ScheduledExecutor ? executor.kv.blockSize : 1,
    numGpuBlocks: executor instanceof ScheduledExecutor ? executor.kv.numBlocks : executor.contextSize * executor.sequences,
  });
  let closed = false;

  // On close, cut keep-alive connections at once: shutting down must not wait for idle clients.
  const httpLimits = resolveHttpLimits(opts.httpLimits, `engine ${opts.name}`);
  const app = Fastify({
    ...fastifyLogger(opts.logger),
    bodyLimit: 16 * 1024 * 1024,
    forceCloseConnections: true,
    // Program ids (the /v1/programs/:id routes) may have 256 characters, percent-encoded (×3).
    routerOptions: { maxParamLength: 3 * 256 },
    ...fastifyHttpLimitOptions(httpLimits, (status, message, code) => new HttpError(status, message, status >= 500 ? "server_error" : "invalid_request_error", null, code).body()),
  });
  limitConnections(app.server, httpLimits);
  registerRequestLimits(app);
  app.addHook("onSend", async (_req, reply, payload) => {
    // Inference answers set the version they were generated with; others report the current one.
    if (!reply.hasHeader("x-arbor-policy-version")) reply.header("x-arbor-policy-version", String(slot.policyVersion));
    return payload;
  });
  app.setErrorHandler((err, _req, reply) => sendError(reply, toHttpError(err)));
  app.setNotFoundHandler((req, reply) =>
    sendError(reply, new HttpError(404, `no route ${req.method} ${req.url}`, "invalid_request_error", null, "not_found")),
  );

  // The model is loaded before the server exists, so it is ready until it closes or drains.
  const probes = registerServiceProbes(app, {
    clock,
    notReady: () => (closed ? "engine is shutting down" : undefined),
    // Every POST is new work (generation, tokenize, weight loads); reads still answer.
    refuseWhileDraining: (req) => (req.method === "POST" ? `engine ${opts.name} is draining: no new requests` : undefined),
  });

  const checkModel = (model: string | null | undefined): void => {
    if (model != null && model !== servedModelName) {
      throw new HttpError(404, `The model \`${model}\` does not exist (this engine serves \`${servedModelName}\`).`, "invalid_request_error", "model", "model_not_found");
    }
  };

  const checkCommon = (body: { model?: string | null; stream?: boolean | null; stream_options?: unknown }): void => {
    if (closed) throw new HttpError(503, "engine is shutting down", "server_error", null, "unavailable");
    checkModel(body.model);
    if (body.stream_options != null && !body.stream) throw invalidRequest("stream_options", "can only be set when stream is true");
  };

  /** Resolve the program id (body `program_id` or header `x-arbor-program`) into the body; check `priority`. */
  const checkProgramTags = (headers: Record<string, string | string[] | undefined>, body: { program_id?: string | null; priority?: number | null }): void => {
    const header = headers["x-arbor-program"];
    if (header !== undefined) {
      if (typeof header !== "string" || header === "" || header.length > 256) throw invalidRequest("x-arbor-program", "the header must be one non-empty program id (at most 256 characters)");
      // Node reads header bytes as latin1: a UTF-8 id would be echoed garbled, so name it as sent.
      if (/[^\x20-\x7e]/.test(header)) {
        throw invalidRequest("x-arbor-program", `program ids are printable ASCII; got '${Buffer.from(header, "latin1").toString("utf8").slice(0, 64)}', which is not printable ASCII`);
      }
      if (body.program_id != null && body.program_id !== header) throw invalidRequest("program_id", `"${body.program_id}" differs from the x-arbor-program header "${header}"`);
      body.program_id = header;
    }
    // As vLLM: a priority only means something to a priority scheduler; refuse it rather than ignore it.
    if (body.priority != null && body.priority !== 0 && slot.executor.schedulingPolicy !== "priority") {
      throw invalidRequest("priority", `got ${body.priority} but priority scheduling is not enabled on this engine (schedulingPolicy "priority")`);
    }
  };

  /** Check the prompt and output budget against the context; the resolved max_tokens. */
  const budget = (lease: SlotLease, prompt: readonly number[], maxTokens: number | null, maxParam: string, promptParam: string): number => {
    const ctx = lease.executor.contextSize;
    if (prompt.length >= ctx) {
      throw invalidRequest(promptParam, `the prompt has ${prompt.length} tokens, over the context of ${ctx} tokens (max_model_len)`, "context_length_exceeded");
    }
    const max = maxTokens ?? ctx - prompt.length;
    if (prompt.length + max > ctx) {
      throw invalidRequest(
        maxParam,
        `the context is ${ctx} tokens, but ${prompt.length + max} were requested (${prompt.length} in the prompt, ${max} to generate); reduce the prompt or ${maxParam}`,
        "context_length_exceeded",
      );
    }
    return max;
  };

  /** What the SSE chunker needs for one streamed request (chat and completions differ in kind and logprobs only). */
  const streamSpec = (
    kind: StreamSpec["kind"],
    o: {
      id: string;
      created: number;
      lease: SlotLease;
      prompt: number[];
      maxTokens: number;
      logprobs: boolean;
      /** The request's own controls: which tokens end it (and so are held back from the stream). */
      controls: SamplingControls | undefined;
      body: { return_token_ids?: boolean | null; stream_options?: { include_usage?: boolean | null; continuous_usage_stats?: boolean | null } | null };
    },
    special: boolean,
  ): StreamSpec => ({
    kind,
    vocab: tok,
    special,
    id: o.id,
    created: o.created,
    model: servedModelName,
    // A getter: chunks after a resume switch report the new version.
    get policyVersion() {
      return o.lease.policyVersion;
    },
    promptTokenIds: o.prompt,
    returnTokenIds: o.body.return_token_ids === true,
    logprobs: o.logprobs,
    includeUsage: o.body.stream_options?.include_usage === true,
    continuousUsage: o.body.stream_options?.continuous_usage_stats === true,
    stopTokenIds: o.controls ? new StopRule(stops, o.controls).stops : stopSet,
    maxTokens: o.maxTokens,
  });

  /** Generate on the lease's executor; the client closing its connection aborts the generation. */
  const run = async (
    reply: FastifyReply,
    lease: SlotLease,
    prompt: number[],
    maxTokens: number,
    body: {
      temperature?: number | null;
      top_p?: number | null;
      seed?: number | null;
      program_id?: string | null;
      draft_group_id?: string | null;
      priority?: number | null;
      stream?: boolean | null;
      kv_transfer_params?: KvTransferParams;
    },
    topLogprobs: number,
    controls: SamplingControls | undefined,
    onToken?: (tok: SampledToken) => void,
  ): Promise<HandoffResult> => {
    const mode = handoff.mode(body.kv_transfer_params, body.stream === true, lease.executor.vocabSize);
    const rng = body.seed != null ? requestRng(body.seed) : engineRng.fork(`request-${requestCounter++}`);
    const onClose = (): void => {
      if (!reply.raw.writableEnded) lease.abort();
    };
    reply.raw.on("close", onClose);
    const start = clock.now();
    try {
      let result: HandoffResult;
      try {
        result = await handoff.generate(mode, {
          promptTokenIds: prompt,
          maxTokens,
          temperature: body.temperature ?? 1,
          topP: body.top_p ?? 1,
          topLogprobs,
          rng,
          ...(controls ? { controls } : {}),
          signal: lease.signal,
          ...(body.program_id != null ? { programId: body.program_id } : {}),
          ...(body.draft_group_id != null ? { draftGroupId: body.draft_group_id } : {}),
          ...(body.priority != null ? { priority: body.priority } : {}),
          ...(onToken ? { onToken } : {}),
        }, (r) => lease.executor.generate(r), slot.executor.kvTransfer);
      } catch (err) {
        // Aborted by a weight switch while waiting for a sequence: still an answer, with no tokens.
        if (err instanceof AbortedError && lease.abortedBySwitch) result = { tokens: [], finishReason: "abort" };
        else throw err;
      }
      metrics.recordFinished({
        promptTokens: prompt.length,
        generationTokens: result.tokens.length,
        finishReason: result.finishReason,
        latencyMs: clock.now() - start,
      });
      return result;
    } finally {
      reply.raw.off("close", onClose);
    }
  };

  /** Stream one generation as SSE chunks (headers go out with the first token). */
  const stream = async (
    reply: FastifyReply,
    lease: SlotLease,
    spec: StreamSpec,
    generate: (onToken: (tok: SampledToken) => void) => Promise<GenerateResult>,
    transform?: (chunk: Chunk) => Chunk,
  ): Promise<void> => {
    reply.hijack();
    const sse = new SseWriter(reply.raw, { "x-arbor-policy-version": String(lease.policyVersion) });
    const chunker = new StreamChunker(spec);
    let started = false;
    const emit = (chunks: readonly Chunk[]): void => {
      for (const c of chunks) sse.send(transform ? transform(c) : c);
    };
    try {
      const result = await generate((tok) => {
        try {
          if (!started) {
            started = true;
            emit(chunker.start());
          }
          emit(chunker.token(tok));
        } catch {
          // A write failure means the client is gone: stop generating for it.
          lease.abort();
        }
      });
      if (!started) emit(chunker.start());
      emit(chunker.finish(result));
      sse.done();
    } catch (err) {
      sse.fail(toHttpError(err));
    }
  };

  app.post("/v1/chat/completions", async (request, reply) => {
    const parsed = ChatCompletionRequestSchema.safeParse(request.body);
    if (!parsed.success) throw fromZodError(parsed.error);
    const body: ChatCompletionRequest = parsed.data;
    checkCommon(body);
    checkProgramTags(request.headers, body);
    const topLogprobs = body.top_logprobs ?? 0;
    if (topLogprobs > 0 && !body.logprobs) throw invalidRequest("top_logprobs", "requires logprobs: true");
    const lease = slot.acquire();
    try {
      // Refused by the engine's role before a stream starts (run checks it again, for its mode).
      handoff.mode(body.kv_transfer_params, body.stream === true, lease.executor.vocabSize);
      const messages = toChatMessages(body.messages);
      checkChatPromptFits(messages, body.tools, lease.executor.contextSize, served.maxTokenChars);
      // The same render as /tokenize (a forced tool call's opening included, a continued final
      // message left open), so token-level clients (the gateway's token path) build exactly this prompt.
      // A continuation's answer is only what the model adds, as vLLM's.
      const { prompt, tools } = renderChatPrompt(messages, body, served, promptEnding(body, messages), parsers);
      // As vLLM's tool parsers (adjust_request: skip_special_tokens=false): a call's markers may be special tokens.
      const special = tools?.parse === true;
      const maxParam = body.max_completion_tokens != null ? "max_completion_tokens" : "max_tokens";
      const maxTokens = budget(lease, prompt, body.max_completion_tokens ?? body.max_tokens ?? null, maxParam, "messages");
      const controls = toSamplingControls(body, maxTokens, maxParam, lease.executor.vocabSize);
      const sampledTop = body.logprobs ? topLogprobs : 0;
      const id = `chatcmpl-${randomUUID().replaceAll("-", "")}`;
      const created = Math.floor(clock.now() / 1000);
      if (body.stream) {
        const spec = streamSpec("chat", { id, created, lease, prompt, maxTokens, body, controls, logprobs: body.logprobs === true }, special);
        // Tool calls and reasoning are read out of the stream as out of the whole answer.
        const reader = tools?.parse || reasoning ? new ChatAnswerStream(tools, toolCallIdPrefix(id), reasoning) : undefined;
        const transform = reader ? (c: Chunk): Chunk => filterToolCallChunk(reader, c) : undefined;
        await stream(reply, lease, spec, (onToken) => run(reply, lease, prompt, maxTokens, body, sampledTop, controls, onToken), transform);
        return;
      }
      const result = await run(reply, lease, prompt, maxTokens, body, sampledTop, controls);
      const text = outputText(tok, result, special);
      const { message, finishReason } = chatAnswer(text, result.finishReason, tools, toolCallIdPrefix(id), reasoning);
      const choice: Record<string, unknown> = {
        index: 0,
        message,
        logprobs: body.logprobs ? chatLogprobs(tok, result.tokens) : null,
        finish_reason: finishReason,
        stop_reason: stopReason(tok, result),
      };
      if (body.return_token_ids) choice.token_ids = result.tokens.map((t) => t.id);
      if (body.return_token_ids) choice.token_policy_versions = lease.tokenPolicyVersions(result.tokens.length);
      reply.header("x-arbor-policy-version", String(lease.policyVersion));
      return {
        id,
        object: "chat.completion",
        created,
        model: servedModelName,
        choices: [choice],
        usage: usage(prompt.length, result.tokens.length),
        ...(body.return_token_ids ? { prompt_token_ids: prompt } : {}),
        policy_version: lease.policyVersion,
        ...(result.kvTransfer ? { kv_transfer_params: result.kvTransfer } : {}),
      };
    } finally {
      lease.release();
    }
  });

  app.post("/v1/completions", async (request, reply) => {
    const parsed = CompletionRequestSchema.safeParse(request.body);
    if (!parsed.success) throw fromZodError(parsed.error);
    const body: CompletionRequest = parsed.data;
    checkCommon(body);
    checkProgramTags(request.headers, body);
    const lease = slot.acquire();
    try {
      handoff.mode(body.kv_transfer_params, body.stream === true, lease.executor.vocabSize);
      let prompt: number[];
      if (typeof body.prompt === "string") {
        checkTextPromptFits(body.prompt, lease.executor.contextSize, served.maxTokenChars);
        const bos = tok.addBos && tok.bosId !== undefined ? [tok.bosId] : [];
        prompt = [...bos, ...tok.encode(body.prompt, { special: served.promptSpecial })];
        if (prompt.length === 0) throw invalidRequest("prompt", "is empty (no tokens, and this model adds no BOS)");
      } else {
        prompt = body.prompt;
        const bad = prompt.findIndex((tok) => tok >= lease.executor.vocabSize);
        if (bad >= 0) throw invalidRequest(`prompt[${bad}]`, `token id ${prompt[bad]} is outside the vocabulary (size ${lease.executor.vocabSize})`);
      }
      const maxTokens = budget(lease, prompt, body.max_tokens ?? 16, "max_tokens", "prompt");
      const topLogprobs = body.logprobs ?? 0;
      const controls = toSamplingControls(body, maxTokens, "max_tokens", lease.executor.vocabSize);
      const id = `cmpl-${randomUUID().replaceAll("-", "")}`;
      const created = Math.floor(clock.now() / 1000);
      if (body.stream) {
        const spec = streamSpec("completion", { id, created, lease, prompt, maxTokens, body, controls, logprobs: body.logprobs != null }, false);
        await stream(reply, lease, spec, (onToken) => run(reply, lease, prompt, maxTokens, body, topLogprobs, controls, onToken));
        return;
      }
      const result = await run(reply, lease, prompt, maxTokens, body, topLogprobs, controls);
      reply.header("x-arbor-policy-version", String(lease.policyVersion));
      return {
        id,
        object: "text_completion",
        created,
        model: servedModelName,
        choices: [
          {
            index: 0,
            text: outputText(tok, result),
            logprobs: body.logprobs != null ? completionLogprobs(tok, result) : null,
            finish_reason: result.finishReason,
            stop_reason: stopReason(tok, result),
            ...(body.return_token_ids ? { token_ids: result.tokens.map((t) => t.id), prompt_token_ids: prompt } : {}),
            ...(body.return_token_ids ? { token_policy_versions: lease.tokenPolicyVersions(result.tokens.length) } : {}),
          },
        ],
        usage: usage(prompt.length, result.tokens.length),
        policy_version: lease.policyVersion,
        ...(result.kvTransfer ? { kv_transfer_params: result.kvTransfer } : {}),
      };
    } finally {
      lease.release();
    }
  });

  registerTokenizeRoutes(app, { served, parsers, maxModelLen: () => slot.executor.contextSize, checkModel });
  registerAdminRoutes(app, { slot, defaultInFlight: opts.inFlightOnWeightSwitch ?? "finish" });
  registerProgramRoutes(app, { slot });
  if (groupService) await registerDraftServiceRoutes(app, groupService);

  app.get("/v1/models", async () => ({
    object: "list",
    data: [
      {
        id: servedModelName,
        object: "model",
        created: Math.floor(clock.now() / 1000),
        owned_by: "arbor",
        root: slot.modelPath,
        parent: null,
        max_model_len: slot.executor.contextSize,
        policy_version: slot.policyVersion,
      },
    ],
    policy_version: slot.policyVersion,
  }));

  app.get("/health", async (_req, reply) => {
    if (closed) return reply.code(503).send({ status: "shutting_down", policy_version: slot.policyVersion });
    // As vLLM: a sleeping engine is healthy (it answers and wakes on request).
    return { status: "ok", policy_version: slot.policyVersion, is_sleeping: slot.sleeping };
  });

  app.get("/metrics", async (_req, reply) => {
    reply.header("content-type", metrics.contentType);
    return metrics.text();
  });

  return {
    app,
    get executor() {
      return slot.executor;
    },
    slot,
    served,
    metrics,
    probes,
    close: async () => {
      if (closed) return;
      closed = true;
      await app.close();
      await slot.close();
      await served.close();
      if (ownsL3) l3?.close();
      await opts.kvPool?.close();
    },
  };
}

/** {@link createEngineServer}, then listen on `host:port` (port 0 = ephemeral). */
export async function startEngineServer(opts: EngineServerOptions): Promise<ListeningEngineServer> {
  const server = await createEngineServer(opts);
  try {
    const host = opts.host ?? "127.0.0.1";
    await server.app.listen({ host, port: opts.port ?? 0 });
    const addr = server.app.server.address();
    const port = typeof addr === "object" && addr ? addr.port : opts.port;
    const urlHost = host.includes(":") ? `[${host}]` : host;
    return Object.assign(server, { url: `http://${urlHost}:${port}` });
  } catch (err) {
    await server.close();
    throw new ArborError(`engine ${opts.name}: cannot listen on ${opts.host ?? "127.0.0.1"}:${opts.port ?? 0}: ${(err as Error).message}`, "engine");
  }
}

/** Tool call ids of one answer: `call_<completion id>_<n>`, unique across a conversation. */
function toolCallIdPrefix(completionId: string): string {
  return `call_${completionId.replace(/^chatcmpl-/, "")}`;
}

/**
 * A request seed → its own Rng, whose token draws depend only on (seed, sequence position): a
 * continuation sent as prompt ‖ tokens so far reproduces the rest of the unbroken generation.
 */
function requestRng(seed: number): Rng {
  return PositionKeyedRng.fromSeed(seed);
}

function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof CapacityError) return new HttpError(429, err.message, "requests", null, "rate_limit_exceeded", { "retry-after": String(RETRY_AFTER_S) });
  // A template that cannot render this conversation (or raise_exception in it), as vLLM: 400.
  if (err instanceof ChatTemplateError) return invalidRequest("messages", err.message, "chat_template_error");
  if (err instanceof AbortedError) return new HttpError(499, err.message, "invalid_request_error", null, "aborted");
  const e = err as { statusCode?: number; message?: string; code?: string };
  // fastify's own errors (unparsable JSON, wrong content type, body too large) carry a 4xx status.
  if (typeof e.statusCode === "number" && e.statusCode >= 400 && e.statusCode < 500) {
    return new HttpError(e.statusCode, `request body: ${e.message ?? "invalid"}`, "invalid_request_error", null, e.code ?? null);
  }
  // The explicit limits (http/request-limits.ts) keep requests from overflowing the stack; should one
  // still, the client gets a clear refusal rather than V8's message.
  if (err instanceof RangeError && /call stack/i.test(err.message)) return invalidRequest(null, "request body: too large or too deeply nested to process");
  if (err instanceof RangeError) return invalidRequest(null, err.message);
  return new HttpError(500, `internal error: ${e.message ?? String(err)}`, "server_error", null, "internal_error");
}

function sendError(reply: FastifyReply, err: HttpError): FastifyReply {
  return reply.code(err.status).headers(err.headers).send(err.body());
}
