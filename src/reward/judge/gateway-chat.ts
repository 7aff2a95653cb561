// Judge models are called THROUGH the gateway, like any program: each judge request opens its own
// gateway program (POST /programs, which returns the program's key), sends one chat completion with
// the openai client to /p/<id>/v1, and releases the program. The gateway thereby routes, limits and
// records judge traffic the same way as policy traffic. A store-backed gateway without a default run (a
// deployment's) refuses programs without one: with `run`, the chat creates that run (POST /runs) the first time.
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
  /** The task the request is about: the program's task where the gateway stores its programs. */
  taskId?: string;
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
  /**
   * The run of the judges' programs where the gateway records into a store and has no default run (a deployment's
   * `arbor serve gateway`): created through POST /runs when the gateway first refuses a program for want of one,
   * ended by `endRun`. Absent: such a gateway's refusal fails the request.
   */
  run?: { id: string; name: string };
}

/** A judge chat through a gateway; `endRun` ends the run it created (if it created one). */
export type GatewayChat = JudgeChat & { endRun(): Promise<void> };

/** The gateway's answer to POST /programs when it needs a run_id (program-table.ts). */
const RUN_REQUIRED = /^run_id: required/;

/** A {@link JudgeChat} that calls the model through an Arbor gateway. */
export function createGatewayChat(opts: GatewayChatOptions): GatewayChat {
  const base = opts.gatewayUrl.replace(/\/+$/, "");
  const auth = opts.adminToken ? { authorization: `Bearer ${opts.adminToken}` } : undefined;
  const newId = opts.newId ?? randomUUID;
  const timeoutMs = opts.timeoutMs ?? 120_000;
  /** POST to the gateway with the admin token (where given): `body` as JSON, or none (release, end). */
  const post = (path: string, body: unknown, signal: AbortSignal): Promise<Response> =>
    fetch(`${base}${path}`, body === undefined ? { method: "POST", headers: { ...auth }, signal } : { method: "POST", headers: { "content-type": "application/json", ...auth }, body: JSON.stringify(body), signal });
  /** The run created for the judges' programs, once asked for (shared by concurrent requests). */
  let run: Promise<string> | undefined;
  const createRun = async (want: { id: string; name: string }, signal: AbortSignal): Promise<string> => {
    const res = await post("/runs", { id: want.id, name: want.name }, signal);
    const body = (await res.json().catch(() => ({}))) as { id?: unknown; error?: { message?: string } };
    if (res.status !== 201 || typeof body.id !== "string") throw new Error(`gateway refused to create the judges' run '${want.id}': ${res.status} ${body.error?.message ?? ""}`.trim());
    return body.id;
  };
  const chat = async (req: JudgeRequest): Promise<string> => {
    const programId = `${req.label}/${newId()}`;
    // Opening and releasing are bounded like the call itself: a stalled gateway fails the attempt.
    const bounded = (): AbortSignal => (req.signal ? AbortSignal.any([req.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs));
    const open = async (): Promise<{ status: number; body: { api_key?: unknown; error?: { message?: string } } }> => {
      const runId = run === undefined ? undefined : await run;
      const res = await post("/programs", { id: programId, ...(runId === undefined ? {} : { run_id: runId }), ...(req.taskId === undefined ? {} : { task_id: req.taskId }) }, bounded());
      return { status: res.status, body: (await res.json().catch(() => ({}))) as { api_key?: unknown; error?: { message?: string } } };
    };
    let opened = await open();
    const want = opts.run;
    if (want !== undefined && opened.status === 400 && RUN_REQUIRED.test(opened.body.error?.message ?? "")) {
      // Concurrent requests refused alike share one creation; a failed one is tried again by the next request.
      if (run === undefined) {
        const created = createRun(want, bounded());
        run = created;
        created.catch(() => {
          if (run === created) run = undefined;
        });
      }
      opened = await open();
    }
    const body = opened.body;
    if (opened.status !== 201 || typeof body.api_key !== "string") {
      throw new Error(`gateway refused to open judge program '${programId}': ${opened.status} ${body.error?.message ?? ""}`.trim());
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
      await post(`/programs/${encodeURIComponent(programId)}/release`, undefined, AbortSignal.timeout(timeoutMs)).catch(() => undefined);
    }
  };
  const endRun = async (): Promise<void> => {
    const created = await run?.catch(() => undefined);
    if (created === undefined) return;
    const res = await post(`/runs/${encodeURIComponent(created)}/end`, undefined, AbortSignal.timeout(timeoutMs));
    if (!res.ok) throw new Error(`gateway did not end the judges' run '${created}': ${res.status} ${await res.text().catch(() => "")}`.trim());
  };
  return Object.assign(chat, { endRun });
}
