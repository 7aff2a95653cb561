// Judge models are called THROUGH the gateway, like any program: each judge request opens its own
// gateway program (POST /programs, which returns the program's key), sends one chat completion with
// the openai client to /p/<id>/v1, and releases the program. The gateway thereby routes, limits and
// records judge traffic the same way as policy traffic.
import { randomUUID } from "node:crypto";
import OpenAI from "openai";
import type { ChatMessage } from "../../core/types.js";

/** One judge request. */
export interface JudgeRequest {
  model: string;
  messages: ChatMessage[];
  maxTokens: number;
  temperature: number;
  /** Names the gateway program (a unique suffix is added), e.g. `judge/<program>`. */
  label: string;
  signal?: AbortSignal;
}

/** Something that answers a judge request with the model's text. */
export type JudgeChat = (req: JudgeRequest) => Promise<string>;

export interface GatewayChatOptions {
  /** Gateway origin, e.g. http://127.0.0.1:8080. */
  gatewayUrl: string;
  /** Admin token, when the gateway requires credentials to create programs. */
  adminToken?: string;
  /** Per-request timeout, ms (default 120000). */
  timeoutMs?: number;
  /** Unique suffix for program ids (default random UUIDs). */
  newId?: () => string;
}

/** A {@link JudgeChat} that calls the model through an Arbor gateway. */
export function createGatewayChat(opts: GatewayChatOptions): JudgeChat {
  const base = opts.gatewayUrl.replace(/\/+$/, "");
  const auth = opts.adminToken ? { authorization: `Bearer ${opts.adminToken}` } : undefined;
  const newId = opts.newId ?? randomUUID;
  const timeoutMs = opts.timeoutMs ?? 120_000;
  return async (req) => {
    const programId = `${req.label}/${newId()}`;
    // Opening and releasing are bounded like the call itself: a stalled gateway fails the attempt.
    const bounded = (): AbortSignal => (req.signal ? AbortSignal.any([req.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs));
    const res = await fetch(`${base}/programs`, {
      method: "POST",
      headers: { "content-type": "application/json", ...auth },
      body: JSON.stringify({ id: programId }),
      signal: bounded(),
    });
    const body = (await res.json().catch(() => ({}))) as { api_key?: unknown; error?: { message?: string } };
    if (res.status !== 201 || typeof body.api_key !== "string") {
      throw new Error(`gateway refused to open judge program '${programId}': ${res.status} ${body.error?.message ?? ""}`.trim());
    }
    try {
      const client = new OpenAI({
        baseURL: `${base}/p/${encodeURIComponent(programId)}/v1`,
        apiKey: body.api_key,
        // Retries are the judge's own (bounded, counted); the client must not add hidden ones.
        maxRetries: 0,
        timeout: timeoutMs,
      });
      const answer = await client.chat.completions.create(
        { model: req.model, messages: req.messages.map((m) => ({ role: m.role === "tool" ? "user" : m.role, content: m.content })) as OpenAI.Chat.ChatCompletionMessageParam[], max_tokens: req.maxTokens, temperature: req.temperature },
        req.signal ? { signal: req.signal } : {},
      );
      return answer.choices[0]?.message?.content ?? "";
    } finally {
      await fetch(`${base}/programs/${encodeURIComponent(programId)}/release`, { method: "POST", signal: AbortSignal.timeout(timeoutMs), ...(auth ? { headers: auth } : {}) }).catch(() => undefined);
    }
  };
}
