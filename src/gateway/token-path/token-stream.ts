// One streamed call on the token path: the same prompt as a non-streamed call (the program's
// history followed by the delta the engine tokenizes), generated with the engine's streamed
// token-level API, and answered with OpenAI chunks the gateway builds from the token deltas.
// Opening the stream is retried once elsewhere after a transport failure (nothing was sent yet);
// once tokens flow a failure ends the stream. Deltas that arrive while the previous ones are being
// decoded are taken together, so a slow detokenizer costs chunks, not the engine's pace.
import type { GenerateResult, GenerateStream, TokenBackend, TokenDelta } from "../../backends/backend.js";
import { ArborError } from "../../core/errors.js";
import type { MaxTokensClamp } from "../../core/types.js";
import type { StreamChunk } from "../surfaces/stream-surface.js";
import type { AnswerPlan } from "./answer-plan.js";
import { IncrementalText } from "./incremental-text.js";
import { buildCallPrompt, generateRequest, isTransportFailure, retryAfter, routeAttempt, type CallPrompt, type TokenCallDeps, type TokenCallInput } from "./token-call.js";
import { TokenChunks, type TokenChunksOptions } from "./token-chunks.js";
import { contentTokenIds } from "./token-response.js";
import { tokenTexts as decodeTokenTexts } from "./token-texts.js";

/** A generation whose stream is open; {@link OpenedTokenStream.done} must be called once it ended. */
export interface OpenedTokenStream {
  routeId: number;
  backend: TokenBackend;
  promptTokenIds: number[];
  contextReset: boolean;
  /** Why the prompt does not continue the previous context (with contextReset). */
  contextResetReason?: string;
  /** The client's max_tokens, clamped to what the context left (absent: served as asked). */
  maxTokensClamped?: MaxTokensClamp;
  /** The client's stops by token id (the last chunk's stop_reason). */
  stops: ReadonlyMap<number, string | number>;
  /** How the answer is read (chat): the parsers of the backend the prompt was built on. */
  answer: AnswerPlan;
  stream: GenerateStream;
  /** The signal bounding the generation (timeout, client gone, backend down, {@link cancel}). */
  signal: AbortSignal;
  /** Cancel the engine's request. */
  cancel(reason: unknown): void;
  /** Release the attempt (its timer and listeners). */
  done(): void;
}

/** Route, build the prompt and open the engine's stream, retrying once elsewhere after a transport failure. */
export async function openTokenStream(input: TokenCallInput, deps: Omit<TokenCallDeps, "generate">): Promise<OpenedTokenStream> {
  const failures: { backend: string; cause: string }[] = [];
  let prompt: CallPrompt | undefined;
  for (;;) {
    const attempt = routeAttempt(deps, prompt?.promptTokenIds, failures);
    const { backend } = attempt;
    // The generation can also be cancelled by the caller (a failed write, a failed decode).
    const ac = new AbortController();
    const follow = (): void => ac.abort(attempt.signal.reason);
    if (attempt.signal.aborted) follow();
    else attempt.signal.addEventListener("abort", follow, { once: true });
    const release = (): void => {
      attempt.signal.removeEventListener("abort", follow);
      attempt.done();
    };
    try {
      const open = backend.generateStream;
      if (!open) throw new ArborError(`backend '${backend.name}' cannot stream token ids; the token path cannot stream from it`, "backend_capability");
      prompt ??= await buildCallPrompt(input, backend, ac.signal);
      const { req, clamped, stops } = await generateRequest(backend, input, prompt, ac.signal);
      const stream = await open.call(backend, req);
      return {
        routeId: attempt.routeId,
        backend,
        promptTokenIds: prompt.promptTokenIds,
        contextReset: prompt.contextReset,
        ...(prompt.contextResetReason !== undefined ? { contextResetReason: prompt.contextResetReason } : {}),
        ...(clamped ? { maxTokensClamped: clamped } : {}),
        stops,
        answer: prompt.answer,
        stream,
        signal: ac.signal,
        cancel: (reason) => ac.abort(reason),
        done: release,
      };
    } catch (e) {
      deps.finished(attempt.routeId, undefined);
      release();
      if (!isTransportFailure(e)) throw e;
      retryAfter(deps, backend.name, e.message, failures);
    }
  }
}

/**
 * Read the opened stream to its end, handing each batch of chunks to `emit` as it is decoded.
 * Returns the engine's result and the answer's whole text (what a non-streamed call decodes).
 * On any failure the engine's request is cancelled before this throws.
 */
export async function streamTokenAnswer(
  opened: OpenedTokenStream,
  options: Omit<TokenChunksOptions, "promptTokenIds" | "answer">,
  emit: (chunks: StreamChunk[]) => void,
): Promise<{ result: GenerateResult; text: string }> {
  const { backend, signal } = opened;
  const detok = backend.detokenize;
  if (!detok) throw new ArborError(`backend '${backend.name}' has no detokenizer endpoint; the token path cannot serve it`, "backend_capability");
  const decode = (ids: number[]): Promise<string> => detok.call(backend, ids, signal);
  const text = new IncrementalText(decode);
  const chunks = new TokenChunks({ ...options, promptTokenIds: opened.promptTokenIds, stops: opened.stops, ...(options.endpoint === "chat" ? { answer: opened.answer } : {}) });

  const queue: TokenDelta[] = [];
  let ended = false;
  let failed: { error: unknown } | undefined;
  let wake: (() => void) | undefined;
  const pump = (async () => {
    try {
      for await (const d of opened.stream.deltas) {
        queue.push(d);
        wake?.();
      }
    } catch (e) {
      failed = { error: e };
    } finally {
      ended = true;
      wake?.();
    }
  })();

  let finished = false;
  try {
    const ids: number[] = [];
    let started = false;
    for (;;) {
      if (queue.length === 0 && !ended) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
      }
      const batch = queue.splice(0);
      if (batch.length === 0) {
        if (ended) break;
        continue;
      }
      const newIds = batch.flatMap((d) => d.ids);
      const logprobs = batch.flatMap((d) => d.logprobs);
      const version = (batch.at(-1) as TokenDelta).policyVersion;
      if (!started) emit(chunks.start(version));
      started = true;
      ids.push(...newIds);
      // The last id may be the stop token that ends the answer: it is decoded only once known not to be.
      const [delta, tokenTexts] = await Promise.all([text.next(ids.slice(0, -1)), options.logprobs ? decodeTokenTexts(newIds, (ids, s) => detok.call(backend, ids, s), signal) : undefined]);
      emit(chunks.delta({ ids: newIds, logprobs, text: delta, ...(tokenTexts ? { tokenTexts } : {}) }, version));
    }
    if (failed) throw failed.error;
    const result = opened.stream.result();
    const whole = await text.finish(contentTokenIds(result));
    if (!started) emit(chunks.start(result.policyVersion));
    emit(chunks.finish({ ids: [], logprobs: [], text: whole.delta }, result));
    finished = true;
    return { result, text: whole.text };
  } finally {
    if (!finished) {
      opened.cancel(signal.aborted ? signal.reason : new ArborError("token path: the streamed answer could not be completed", "stream_failed"));
      await pump;
    }
  }
}
