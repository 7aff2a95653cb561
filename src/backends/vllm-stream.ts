// A streamed token-level generation read from vLLM-shaped /v1/completions chunks (vLLM >= 0.10.2
// and Arbor's engine): `prompt_token_ids` on the first chunk's choice, `token_ids` and
// `logprobs.token_logprobs` per chunk, `finish_reason` last, then `[DONE]`; an `{error}` event means
// the engine failed mid-generation. Stop token ids are applied here too (as applyStopTokens does for
// whole answers): the stream ends at the first one and the engine's request is cancelled.
import { BackendHttpError, BackendProtocolError, type GenerateResult, type GenerateStream, type TokenDelta } from "./backend.js";
import { checkTokens, isPolicyVersions, isTokenIds } from "./token-result.js";

export interface CompletionTokenStreamOptions {
  name: string;
  url: string;
  /** The engine reports policy_version (Arbor's engine); vLLM does not (null). */
  policyVersion: boolean;
  stopTokenIds?: readonly number[];
}

/**
 * Read `events` (each SSE event's data, as {@link sseData} yields them) as a {@link GenerateStream}.
 * Breaking out of `deltas` early returns the events iterator, which cancels the engine's request.
 */
export function completionTokenStream(events: AsyncIterable<string>, opts: CompletionTokenStreamOptions): GenerateStream {
  const { name, url } = opts;
  const stop = new Set(opts.stopTokenIds ?? []);
  const ids: number[] = [];
  const logprobs: number[] = [];
  let prompt: number[] | undefined;
  let policyVersion: number | null = null;
  // Per-token versions (Arbor's engine): a chunk's token_policy_versions, else its policy_version
  // (the engine's chunks carry the version of their own tokens); dropped if a chunk has neither.
  const tokenVersions: number[] = [];
  let versionsComplete = opts.policyVersion;
  let finish: GenerateResult["finishReason"] | undefined;
  let result: GenerateResult | undefined;
  const protocol = (problem: string): BackendProtocolError => new BackendProtocolError(name, url, problem);

  async function* deltas(): AsyncGenerator<TokenDelta> {
    let done = false;
    for await (const data of events) {
      if (data === "[DONE]") {
        done = true;
        break;
      }
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      let chunk: any;
      try {
        chunk = JSON.parse(data);
      } catch {
        throw protocol(`streamed an event that is not JSON: ${data.slice(0, 200)}`);
      }
      if (typeof chunk !== "object" || chunk === null) throw protocol("streamed a chunk that is not a JSON object");
      if ("error" in chunk) {
        const code: unknown = chunk.error?.code;
        const message: unknown = chunk.error?.message;
        const status = typeof code === "number" && code >= 400 && code < 600 ? code : 500;
        throw new BackendHttpError(name, url, status, `failed mid-stream: ${typeof message === "string" ? message : data.slice(0, 200)}`, chunk);
      }
      if (opts.policyVersion && chunk.policy_version !== undefined) {
        if (!(Number.isInteger(chunk.policy_version) && chunk.policy_version >= 0)) throw protocol("streamed a policy_version that is not an integer >= 0");
        policyVersion = chunk.policy_version;
      }
      if (!Array.isArray(chunk.choices)) throw protocol("streamed a chunk without choices");
      // A usage-only chunk has no choices.
      const choice = chunk.choices[0];
      if (choice === undefined) continue;
      if ((choice.index ?? 0) !== 0) throw protocol(`streamed choice ${String(choice.index)} (only one was asked for)`);
      const promptIds: unknown = choice.prompt_token_ids ?? chunk.prompt_token_ids;
      if (promptIds !== undefined && promptIds !== null) {
        if (!isTokenIds(promptIds)) throw protocol("streamed invalid prompt_token_ids");
        prompt ??= promptIds;
      }
      const newIds: unknown = choice.token_ids ?? [];
      if (!isTokenIds(newIds)) {
        throw protocol("streamed a chunk without choices[0].token_ids; token-level calls need return_token_ids (vLLM >= 0.10.2 or the built-in engine)");
      }
      const newLps: unknown = choice.logprobs?.token_logprobs ?? [];
      if (!Array.isArray(newLps)) throw protocol("streamed invalid choices[0].logprobs.token_logprobs");
      checkTokens(name, url, newIds, newLps, "a streamed chunk's token_ids vs logprobs.token_logprobs");
      const at = newIds.findIndex((t) => stop.has(t));
      const keep = at < 0 ? newIds.length : at + 1;
      const delta: TokenDelta = { ids: newIds.slice(0, keep), logprobs: (newLps as number[]).slice(0, keep), policyVersion };
      const chunkVersions: unknown = choice.token_policy_versions;
      if (versionsComplete && newIds.length > 0) {
        if (chunkVersions === undefined || chunkVersions === null) {
          if (policyVersion === null) versionsComplete = false;
          else for (let i = 0; i < keep; i++) tokenVersions.push(policyVersion);
        } else if (!isPolicyVersions(chunkVersions) || chunkVersions.length !== newIds.length) {
          throw protocol("streamed token_policy_versions that is not one integer >= 0 per token of its chunk");
        } else tokenVersions.push(...chunkVersions.slice(0, keep));
      }
      ids.push(...delta.ids);
      logprobs.push(...delta.logprobs);
      if (at >= 0) finish = "stop";
      else if (choice.finish_reason !== null && choice.finish_reason !== undefined) finish = finishReason(choice.finish_reason);
      if (delta.ids.length > 0) yield delta;
      // A stop token the engine did not honour ends the generation here (returning cancels the request).
      if (at >= 0) {
        done = true;
        break;
      }
    }
    if (!done) throw protocol("ended the event stream without [DONE]");
    if (finish === undefined) throw protocol("streamed no finish_reason before [DONE]");
    if (prompt === undefined) throw protocol("streamed no choices[0].prompt_token_ids");
    if (opts.policyVersion && policyVersion === null) throw protocol("streamed no policy_version (an integer >= 0)");
    result = { outputTokenIds: ids, logprobs, finishReason: finish, policyVersion, promptTokenIds: prompt };
    // Kept only where they say more than policyVersion (absent = all tokens at it).
    if (versionsComplete && tokenVersions.some((v) => v !== policyVersion)) result.tokenPolicyVersions = tokenVersions;
  }

  function finishReason(raw: unknown): GenerateResult["finishReason"] {
    if (raw === "stop" || raw === "length" || raw === "abort") return raw;
    // vLLM's repetition detection ends the output by a rule, not the budget (as in generate).
    if (raw === "repetition") return "stop";
    throw protocol(`streamed finish_reason ${JSON.stringify(raw)} (expected stop, length or abort)`);
  }

  return {
    deltas: deltas(),
    result() {
      if (!result) throw new BackendProtocolError(name, url, "stream result read before the stream ended");
      return result;
    },
  };
}
