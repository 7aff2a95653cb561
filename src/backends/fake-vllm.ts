// A tiny vLLM-shaped OpenAI server for tests and `arbor bench gateway` (not a model): deterministic
// "token ids" (byte-level, or a real model's tokenizer and template: fake-vllm-tokenizer.ts) and
// logprobs in exactly the shapes vLLM / the built-in engine return with return_token_ids, and vLLM's
// /tokenize and /detokenize, so the gateway's token path can serve it.
import Fastify from "fastify";
import { byteTokenizer, realTokenizer } from "./fake-vllm-tokenizer.js";
import type { ServedTokenizer } from "./local-tokenizer.js";

export { fakeChatPrompt, fakeReplyText, fakeTokenize } from "./fake-vllm-tokenizer.js";

export interface FakeVllmOptions {
  /** policy_version reported in every answer. */
  policyVersion?: number;
  model?: string;
  /**
   * Keep every inference request in {@link FakeVllm.requests} (default true, for tests). A long
   * benchmark turns it off: the list would grow without bound.
   */
  recordRequests?: boolean;
  /** max_model_len reported by /tokenize (default 32768). */
  maxModelLen?: number;
  /** Tokenize with this model's tokenizer and chat template instead of the byte-level fake. */
  tokenizer?: ServedTokenizer;
}

export interface FakeRequest {
  path: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

export interface FakeVllm {
  /** Base URL ending in /v1. */
  readonly url: string;
  /** Every inference request received, in arrival order. */
  readonly requests: FakeRequest[];
  /** Requests currently being answered (held ones included). */
  readonly inFlight: number;
  /** Hold every inference request until {@link FakeVllm.releaseHeld}. */
  hold(): void;
  releaseHeld(): void;
  /** Resolves once at least `n` inference requests have arrived. */
  waitForRequests(n: number): Promise<void>;
  /** Answer the next `times` inference requests with an OpenAI-shaped error. */
  failNext(status: number, message: string, times?: number): void;
  close(): Promise<void>;
}

/** The logprob the fake reports for output token `id` at position `i` (exact binary fractions). */
export function fakeLogprob(id: number, i: number): number {
  return -(((id * 31 + i * 7) % 64) + 1) / 64;
}

/** Start the fake on 127.0.0.1 with an ephemeral port. */
export async function startFakeVllm(opts: FakeVllmOptions = {}): Promise<FakeVllm> {
  const policyVersion = opts.policyVersion ?? 0;
  const model = opts.model ?? "fake-model";
  const recordRequests = opts.recordRequests ?? true;
  const maxModelLen = opts.maxModelLen ?? 32_768;
  const tok = opts.tokenizer ? realTokenizer(opts.tokenizer) : byteTokenizer;
  const requests: FakeRequest[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  let holding = false;
  let releaseGate: () => void = () => {};
  let gate: Promise<void> = Promise.resolve();
  let inFlight = 0;
  let failures: { status: number; message: string; left: number } | undefined;
  let seq = 0;

  const app = Fastify({ logger: false });

  const errorBody = (message: string, type = "BadRequestError") => ({ error: { message, type, param: null, code: 400 } });

  function output(promptText: string, maxTokens: unknown): { ids: number[]; text: string; finish: string } {
    return tok.reply(promptText, typeof maxTokens === "number" ? maxTokens : Infinity);
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function admit(path: string, body: any): Promise<{ status: number; json: unknown } | undefined> {
    if (recordRequests) requests.push({ path, body });
    for (const w of waiters.filter((x) => requests.length >= x.n)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
    if (holding) await gate;
    if (failures && failures.left > 0) {
      failures.left--;
      return { status: failures.status, json: { error: { message: failures.message, type: "Error", param: null, code: failures.status } } };
    }
    if (body?.stream) return { status: 400, json: errorBody("fake: stream not supported") };
    return undefined;
  }

  app.post("/v1/chat/completions", async (req, reply) => {
    inFlight++;
    try {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const body = req.body as any;
      const early = await admit("/chat/completions", body);
      if (early) return reply.code(early.status).send(early.json);
      if (!Array.isArray(body?.messages) || body.messages.length === 0) {
        return reply.code(400).send(errorBody("messages: must be a non-empty list"));
      }
      const { ids: promptIds, text: promptText } = tok.chat(body.messages, true);
      const out = output(promptText, body.max_tokens);
      const k = typeof body.top_logprobs === "number" ? body.top_logprobs : 0;
      const choice: Record<string, unknown> = {
        index: 0,
        message: { role: "assistant", content: out.text },
        finish_reason: out.finish,
        logprobs: body.logprobs
          ? {
              content: out.ids.map((id, i) => ({
                token: tok.tokenText(id),
                logprob: fakeLogprob(id, i),
                bytes: tok.tokenBytes(id),
                top_logprobs: Array.from({ length: k }, (_, j) => ({
                  token: tok.tokenText(tok.alternative(id, j)),
                  logprob: fakeLogprob(id, i) - j,
                  bytes: tok.tokenBytes(tok.alternative(id, j)),
                })),
              })),
            }
          : null,
      };
      if (body.return_token_ids) choice.token_ids = out.ids;
      return {
        id: `chatcmpl-fake-${seq++}`,
        object: "chat.completion",
        created: 1_700_000_000,
        model,
        choices: [choice],
        usage: { prompt_tokens: promptIds.length, completion_tokens: out.ids.length, total_tokens: promptIds.length + out.ids.length },
        ...(body.return_token_ids ? { prompt_token_ids: promptIds } : {}),
        policy_version: policyVersion,
      };
    } finally {
      inFlight--;
    }
  });

  app.post("/v1/completions", async (req, reply) => {
    inFlight++;
    try {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const body = req.body as any;
      const early = await admit("/completions", body);
      if (early) return reply.code(early.status).send(early.json);
      let prompt = body?.prompt;
      if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] !== "number") prompt = prompt[0];
      let promptIds: number[];
      let promptText: string;
      if (typeof prompt === "string") {
        promptText = prompt;
        promptIds = tok.text(prompt, body.add_special_tokens !== false);
      } else if (Array.isArray(prompt) && prompt.length > 0 && prompt.every((x) => Number.isInteger(x))) {
        promptIds = prompt as number[];
        promptText = tok.promptText(promptIds);
      } else {
        return reply.code(400).send(errorBody("prompt: must be a string or a list of token ids"));
      }
      const out = output(promptText, body.max_tokens ?? 16);
      const wantLp = typeof body.logprobs === "number";
      let offset = 0;
      const choice: Record<string, unknown> = {
        index: 0,
        text: out.text,
        finish_reason: out.finish,
        logprobs: wantLp
          ? {
              tokens: out.ids.map((id) => tok.tokenText(id)),
              token_logprobs: out.ids.map((id, i) => fakeLogprob(id, i)),
              top_logprobs: out.ids.map((id, i) => {
                const top: Record<string, number> = { [tok.tokenText(id)]: fakeLogprob(id, i) };
                for (let j = 1; j < body.logprobs; j++) top[tok.tokenText(tok.alternative(id, j))] = fakeLogprob(id, i) - j;
                return top;
              }),
              text_offset: out.ids.map(() => offset++),
            }
          : null,
      };
      if (body.return_token_ids) {
        choice.token_ids = out.ids;
        choice.prompt_token_ids = promptIds;
      }
      return {
        id: `cmpl-fake-${seq++}`,
        object: "text_completion",
        created: 1_700_000_000,
        model,
        choices: [choice],
        usage: { prompt_tokens: promptIds.length, completion_tokens: out.ids.length, total_tokens: promptIds.length + out.ids.length },
        policy_version: policyVersion,
      };
    } finally {
      inFlight--;
    }
  });

  // vLLM's tokenizer routes (at the server root): chat messages rendered by the fake template, or a text.
  app.post("/tokenize", async (req, reply) => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const body = req.body as any;
    let tokens: number[];
    if (Array.isArray(body?.messages)) {
      if (!body.messages.every((m: unknown) => typeof (m as { content?: unknown })?.content === "string")) {
        return reply.code(400).send(errorBody("messages[].content: the fake renders string contents only"));
      }
      tokens = tok.chat(body.messages, body.add_generation_prompt !== false, Array.isArray(body.tools) ? body.tools : undefined).ids;
    } else if (typeof body?.prompt === "string") {
      tokens = tok.text(body.prompt, body.add_special_tokens !== false);
    } else {
      return reply.code(400).send(errorBody("tokenize: needs messages or prompt"));
    }
    return { count: tokens.length, max_model_len: maxModelLen, tokens };
  });

  app.post("/detokenize", async (req, reply) => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const tokens = (req.body as any)?.tokens;
    const text = Array.isArray(tokens) ? tok.detokenize(tokens) : undefined;
    if (text === undefined) return reply.code(400).send(errorBody(tok.badTokens));
    return { prompt: text };
  });

  app.get("/v1/models", async () => ({
    object: "list",
    data: [{ id: model, object: "model", created: 1_700_000_000, owned_by: "arbor" }],
  }));

  await app.listen({ host: "127.0.0.1", port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === "string") throw new Error("fake vllm: no TCP address");

  return {
    url: `http://127.0.0.1:${addr.port}/v1`,
    requests,
    get inFlight() {
      return inFlight;
    },
    hold() {
      if (holding) return;
      holding = true;
      gate = new Promise((r) => (releaseGate = r));
    },
    releaseHeld() {
      holding = false;
      releaseGate();
    },
    waitForRequests(n) {
      if (requests.length >= n) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ n, resolve }));
    },
    failNext(status, message, times = 1) {
      failures = { status, message, left: times };
    },
    async close() {
      holding = false;
      releaseGate();
      await app.close();
    },
  };
}
