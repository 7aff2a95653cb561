// The `judge` reward of `arbor run`: judge calls go through a gateway of their own — one program per judge
// request (src/reward/judge/gateway-chat.ts) — in front of the run's backends, and are recorded apart from
// the policy's: one JSON line per call in `<output.dir>/judge-calls.jsonl`, never in the run's store, so no
// judge call can reach a training batch. The judge gateway listens on 127.0.0.1 on an ephemeral port and
// requires program keys under a fresh admin token, so only this process opens judge programs.
import { randomBytes } from "node:crypto";
import { appendFileSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { Backend } from "../backends/backend.js";
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import type { Call } from "../core/types.js";
import { createGateway, type Gateway } from "../gateway/server.js";
import { createGatewayChat, type JudgeChat } from "../reward/judge/gateway-chat.js";

/** What `arbor run` holds for the judge reward. */
export interface RunJudge {
  /** Reward dependencies for `createRewardFromConfig`: the judge's chat when the config weights `judge`. */
  readonly deps: { judgeChat?: JudgeChat };
  /** Start the judge gateway over the run's backends (nothing without the judge reward). */
  start(backends: readonly Backend[]): Promise<void>;
  /** Stop the judge gateway (idempotent). */
  close(): Promise<void>;
}

export interface RunJudgeOptions {
  /** The config's `reward` section: the gateway starts only when it weights `judge`. */
  reward: { judge?: number | undefined };
  /** Where judge calls are recorded, one JSON line per call. */
  callsPath: string;
  /** Per judge request, ms (the gateway's call timeout too). */
  timeoutMs?: number;
  clock?: Clock;
  log?: (line: string) => void;
}

/** The judge wiring of a run; call `start` once the backends exist and `close` when the run ends. */
export function createRunJudge(o: RunJudgeOptions): RunJudge {
  if (o.reward.judge === undefined) return { deps: {}, start: async () => {}, close: async () => {} };
  const adminToken = randomBytes(24).toString("hex");
  const timeoutMs = o.timeoutMs ?? 120_000;
  let gateway: Gateway | undefined;
  let chat: JudgeChat | undefined;
  const judgeChat: JudgeChat = (req) => {
    if (!chat) return Promise.reject(new ArborError("reward.judge: the judge gateway is not running (it starts with the run's backends)", "config"));
    return chat(req);
  };
  return {
    deps: { judgeChat },
    async start(backends) {
      if (gateway) return;
      mkdirSync(dirname(o.callsPath), { recursive: true });
      const g = createGateway({
        backends: [...backends],
        // appendFileSync returns once the line is written: durable as TraceSink asks.
        sink: { recordCall: async (c: Call) => appendFileSync(o.callsPath, `${JSON.stringify(c)}\n`) },
        auth: { adminToken, requireProgramKeys: true },
        callTimeoutMs: timeoutMs,
        ...(o.clock ? { clock: o.clock } : {}),
      });
      const url = await g.listen("127.0.0.1", 0);
      gateway = g;
      chat = createGatewayChat({ gatewayUrl: url, adminToken, timeoutMs });
      o.log?.(`judge    ${url} (judge reward's gateway over ${backends.map((b) => b.name).join(", ")}; calls in ${o.callsPath})`);
    },
    async close() {
      const g = gateway;
      gateway = undefined;
      chat = undefined;
      await g?.close();
    },
  };
}
