// The load generator of `arbor bench gateway`, run in a process of its own (gateway-bench-child.ts) so its
// CPU is not the gateway's: RL-shaped multi-turn conversations (a long system prompt, each turn sending
// back the previous answer), against the upstream directly or through the gateway's per-program route,
// where each conversation is a program created and released as a rollout does. It measures each chat
// request's latency and the requests/s of the whole run.
import { Agent, request } from "node:http";
import { performance } from "node:perf_hooks";
import { ArborError } from "../core/errors.js";

/** Where a run's requests go. */
export type LoadTarget =
  /** The upstream's /v1/chat/completions, asking what a token-recording client asks (token ids, logprobs). */
  | { kind: "direct"; name: string; upstream: string }
  /** The upstream calls the gateway's token path makes for one chat turn: /tokenize, /v1/completions with the ids, /detokenize. */
  | { kind: "direct-token-calls"; name: string; upstream: string }
  /** The gateway: POST /programs, the turns on /p/{id}/v1/chat/completions, POST /programs/{id}/release. */
  /**
   * Store-backed, programs are placed in `place`: the plan's n-th program in group `groupPrefix` + (floor(n / 8)
   * % groups) as sample n % 8 (groups of 8, as a GRPO rollout makes them), of task `taskId`; a trace-only gateway
   * takes just the id.
   */
  | { kind: "gateway"; name: string; gateway: string; place?: { groupPrefix: string; groups: number; taskId: string } };

/** One load run. */
export interface LoadPlan {
  /**
   * `latency`: one client, its turns taken in rotation over the targets (drift hits every path alike);
   * `throughput`: `clients` concurrent clients on the first target only.
   */
  mode: "latency" | "throughput";
  targets: LoadTarget[];
  /** Timed chat requests per target. */
  requests: number;
  /** Untimed chat requests per target before the timed ones. */
  warmup: number;
  clients: number;
  /** Chat turns per conversation (program). */
  turns: number;
  maxTokens: number;
  /** Characters of the system prompt every conversation starts with (an agent's instructions). */
  systemChars: number;
  /** Prefix of the program ids this run creates (unique per run). */
  programPrefix: string;
}

/** What a run measured per target. */
export interface LoadResult {
  name: string;
  /** Timed chat requests, and all chat requests sent (warm-up included). */
  requests: number;
  sent: number;
  /** Programs created (gateway targets). */
  programs: number;
  /** Each timed request's latency, ms, sorted ascending. */
  latenciesMs: number[];
  /** Wall time of the timed requests, ms (throughput mode: all clients together). */
  elapsedMs: number;
  /** The load generator's CPU time (user + system) over the whole plan, warm-up and program ends included, ms. */
  cpuMs: number;
}

type Message = { role: string; content: string };

/** Programs per group (a GRPO rollout's usual group size). */
const GROUP_SIZE = 8;

const REQUEST_TIMEOUT_MS = 30_000;
/** Longest answer body read (a runaway upstream must not fill the load generator's memory). */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** Check a plan's fields (the child gets it as JSON from its parent). */
export function checkLoadPlan(plan: LoadPlan): void {
  for (const k of ["requests", "warmup", "clients", "turns", "maxTokens", "systemChars"] as const) {
    const v = plan[k];
    const min = k === "warmup" || k === "systemChars" ? 0 : 1;
    if (!(Number.isInteger(v) && v >= min)) throw new ArborError(`load plan ${k}: must be an integer >= ${min}, got ${v}`, "config");
  }
  if (plan.mode !== "latency" && plan.mode !== "throughput") throw new ArborError(`load plan mode: must be latency or throughput, got ${String(plan.mode)}`, "config");
  if (!Array.isArray(plan.targets) || plan.targets.length === 0) throw new ArborError("load plan targets: must name at least one target", "config");
  plan.targets.forEach((t, k) => {
    const groups = t.kind === "gateway" ? t.place?.groups : undefined;
    if (groups !== undefined && !(Number.isInteger(groups) && groups >= 1)) throw new ArborError(`load plan targets[${k}].place.groups: must be an integer >= 1, got ${groups}`, "config");
  });
}

/** A keep-alive HTTP/1.1 client: one POST with a JSON body, its answer parsed. */
class JsonClient {
  private readonly agent: Agent;

  constructor(sockets: number) {
    this.agent = new Agent({ keepAlive: true, maxSockets: sockets });
  }

  post(url: string, body: unknown): Promise<unknown> {
    const payload = Buffer.from(JSON.stringify(body));
    const u = new URL(url);
    return new Promise((resolve, reject) => {
      const req = request(
        {
          agent: this.agent,
          host: u.hostname,
          port: u.port,
          path: u.pathname,
          method: "POST",
          headers: { "content-type": "application/json", "content-length": payload.length },
          timeout: REQUEST_TIMEOUT_MS,
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on("data", (c: Buffer) => {
            size += c.length;
            if (size > MAX_ANSWER_BYTES) req.destroy(new ArborError(`gateway bench: POST ${url} answered more than ${MAX_ANSWER_BYTES} bytes`));
            else chunks.push(c);
          });
          res.on("error", reject);
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8");
            const status = res.statusCode ?? 0;
            if (status < 200 || status >= 300) {
              reject(new ArborError(`gateway bench: POST ${url} answered HTTP ${status}: ${text.slice(0, 300)}`));
              return;
            }
            try {
              resolve(JSON.parse(text));
            } catch {
              reject(new ArborError(`gateway bench: POST ${url} answered non-JSON: ${text.slice(0, 200)}`));
            }
          });
        },
      );
      req.on("timeout", () => req.destroy(new ArborError(`gateway bench: POST ${url}: no answer within ${REQUEST_TIMEOUT_MS} ms`)));
      req.on("error", reject);
      req.end(payload);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** The assistant text of a chat completion (the next turn sends it back). */
function answerText(json: unknown, url: string): string {
  const content = (json as { choices?: { message?: { content?: unknown } }[] })?.choices?.[0]?.message?.content;
  if (typeof content !== "string") throw new ArborError(`gateway bench: ${url} answered without choices[0].message.content`);
  return content;
}

/** One client's conversation on one target: a program (gateway) whose turns grow the messages. */
class Conversation {
  private messages: Message[] = [];
  private turn = 0;
  private programId: string | undefined;
  programs = 0;

  constructor(
    private readonly target: LoadTarget,
    private readonly plan: LoadPlan,
    private readonly http: JsonClient,
    private readonly system: string,
    private readonly idOf: () => string,
    /** The plan's count of programs created on this target so far (this one's ordinal). */
    private readonly placed: () => number,
  ) {}

  /** Send the next chat turn; `timed` is called around the chat request only (not program creation or release). */
  async next(timed: (run: () => Promise<string>) => Promise<string>): Promise<void> {
    const t = this.target;
    if (this.turn === 0) {
      this.messages = [{ role: "system", content: this.system }];
      if (t.kind === "gateway") {
        const n = this.placed();
        this.programId = this.idOf();
        const p = t.place;
        const place = p ? { group_id: `${p.groupPrefix}${Math.floor(n / GROUP_SIZE) % p.groups}`, task_id: p.taskId, sample_index: n % GROUP_SIZE } : {};
        await this.http.post(`${t.gateway}/programs`, { id: this.programId, ...place });
        this.programs++;
      }
    }
    this.messages.push({ role: "user", content: `step ${this.turn}: run the next command and report what it printed in a few words` });
    const answer = await timed(() => this.send());
    this.messages.push({ role: "assistant", content: answer });
    this.turn++;
    if (this.turn >= this.plan.turns) await this.end();
  }

  /** Release the open program, if any (a rollout releases each program when its episode ends). */
  async end(): Promise<void> {
    const t = this.target;
    if (t.kind === "gateway" && this.programId !== undefined && this.turn > 0) {
      await this.http.post(`${t.gateway}/programs/${encodeURIComponent(this.programId)}/release`, {});
    }
    this.programId = undefined;
    this.turn = 0;
  }

  private async send(): Promise<string> {
    const t = this.target;
    const { maxTokens } = this.plan;
    if (t.kind === "gateway") {
      const url = `${t.gateway}/p/${encodeURIComponent(this.programId as string)}/v1/chat/completions`;
      return answerText(await this.http.post(url, { model: "fake-model", messages: this.messages, max_tokens: maxTokens }), url);
    }
    if (t.kind === "direct") {
      const url = `${t.upstream}/v1/chat/completions`;
      return answerText(await this.http.post(url, { model: "fake-model", messages: this.messages, max_tokens: maxTokens, return_token_ids: true, logprobs: true }), url);
    }
    // The token path's upstream calls for a first turn, in its order: render and tokenize, generate, decode.
    const tok = (await this.http.post(`${t.upstream}/tokenize`, { messages: this.messages, add_generation_prompt: true, add_special_tokens: false })) as { tokens: number[] };
    const gen = (await this.http.post(`${t.upstream}/v1/completions`, {
      prompt: tok.tokens,
      max_tokens: maxTokens,
      temperature: 1,
      logprobs: 0,
      return_token_ids: true,
      stream: false,
    })) as { choices: { token_ids: number[] }[] };
    const ids = gen.choices[0]?.token_ids ?? [];
    return ((await this.http.post(`${t.upstream}/detokenize`, { tokens: ids })) as { prompt: string }).prompt;
  }
}

/** The system prompt: `chars` characters of agent instructions (ASCII, so one fake token each). */
export function systemPrompt(chars: number): string {
  const line = "You are a software agent. Use the tools to inspect the repository, run the tests and fix the failing ones. ";
  return line.repeat(Math.ceil(chars / line.length)).slice(0, chars);
}

/** Run a load plan; throws on the first failed request (every request must succeed). */
export async function runLoad(plan: LoadPlan): Promise<LoadResult[]> {
  checkLoadPlan(plan);
  const cpu0 = process.cpuUsage();
  const cpuMs = (): number => {
    const c = process.cpuUsage(cpu0);
    return (c.user + c.system) / 1000;
  };
  const system = systemPrompt(plan.systemChars);
  const http = new JsonClient(plan.mode === "latency" ? 1 : plan.clients);
  let ids = 0;
  const idOf = (target: number, client: number) => () => `${plan.programPrefix}-t${target}-c${client}-${ids++}`;
  const placedOn = plan.targets.map(() => 0);
  const placed = (target: number) => (): number => {
    const n = placedOn[target] as number;
    placedOn[target] = n + 1;
    return n;
  };
  try {
    if (plan.mode === "latency") {
      const convs = plan.targets.map((t, k) => new Conversation(t, plan, http, system, idOf(k, 0), placed(k)));
      const samples = plan.targets.map(() => [] as number[]);
      const untimed = (run: () => Promise<string>) => run();
      for (let i = 0; i < plan.warmup; i++) for (const c of convs) await c.next(untimed);
      const t0 = performance.now();
      for (let i = 0; i < plan.requests; i++) {
        for (const [k, c] of convs.entries()) {
          await c.next(async (run) => {
            const s = performance.now();
            const answer = await run();
            samples[k]?.push(performance.now() - s);
            return answer;
          });
        }
      }
      const elapsedMs = performance.now() - t0;
      for (const c of convs) await c.end();
      const cpu = cpuMs();
      return plan.targets.map((t, k) => ({
        name: t.name,
        requests: plan.requests,
        sent: plan.requests + plan.warmup,
        programs: convs[k]?.programs ?? 0,
        latenciesMs: (samples[k] ?? []).sort((a, b) => a - b),
        elapsedMs,
        cpuMs: cpu,
      }));
    }

    const target = plan.targets[0] as LoadTarget;
    const clients = Math.min(plan.clients, plan.requests);
    const convs = Array.from({ length: clients }, (_, c) => new Conversation(target, plan, http, system, idOf(0, c), placed(0)));
    const latencies: number[] = [];
    const drive = async (total: number, timed: boolean): Promise<void> => {
      let next = 0;
      await Promise.all(
        convs.map(async (c) => {
          while (next < total) {
            next++;
            await c.next(async (run) => {
              const s = performance.now();
              const answer = await run();
              if (timed) latencies.push(performance.now() - s);
              return answer;
            });
          }
        }),
      );
    };
    await drive(plan.warmup, false);
    const t0 = performance.now();
    await drive(plan.requests, true);
    const elapsedMs = performance.now() - t0;
    await Promise.all(convs.map((c) => c.end()));
    return [
      {
        name: target.name,
        requests: plan.requests,
        sent: plan.requests + plan.warmup,
        programs: convs.reduce((n, c) => n + c.programs, 0),
        latenciesMs: latencies.sort((a, b) => a - b),
        elapsedMs,
        cpuMs: cpuMs(),
      },
    ];
  } finally {
    http.close();
  }
}
