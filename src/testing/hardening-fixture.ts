// Test fixture for the hardening tests: a gateway in front of a real engine server (its HTTP layer,
// validation and limits) whose executor answers by script, so hostile requests run in milliseconds,
// plus raw-socket helpers for what fetch cannot send (stalled bodies, partial headers).
import { connect, type Socket } from "node:net";
import { createArborBackend } from "../backends/vllm.js";
import { realClock } from "../core/real-clock.js";
import type { Call } from "../core/types.js";
import { ScriptedExecutor } from "./scripted-executor.js";
import { startEngineServer, type EngineServerOptions, type ListeningEngineServer } from "../engine/server.js";
import { createGateway, type Gateway, type GatewayOptions } from "../gateway/server.js";

export interface HardeningSetup {
  engine: ListeningEngineServer;
  gw: Gateway;
  url: string;
  calls: Call[];
  close(): Promise<void>;
}

/** An engine (context `contextSize`, scripted answer "ok") behind a gateway with `extra` options. */
export async function startHardeningSetup(
  extra: Partial<GatewayOptions> = {},
  engineExtra: Partial<EngineServerOptions> = {},
  contextSize = 512,
): Promise<HardeningSetup> {
  const engine = await startEngineServer({
    name: "e0",
    modelPath: "scripted",
    policyVersion: 1,
    sequences: 2,
    contextSize,
    maxWaiting: 64,
    executor: new ScriptedExecutor(() => "ok", contextSize),
    ...engineExtra,
  });
  const calls: Call[] = [];
  const gw = createGateway({
    backends: [createArborBackend({ name: "e0", url: `${engine.url}/v1` })],
    sink: { recordCall: async (c) => void calls.push(structuredClone(c)) },
    ...extra,
  });
  const url = await gw.listen("127.0.0.1", 0);
  return {
    engine,
    gw,
    url,
    calls,
    async close() {
      await gw.close();
      await engine.close();
    },
  };
}

/** Whether every backend of the gateway is still in rotation. */
export function allBackendsUp(gw: Gateway): boolean {
  return gw.router.views().every((v) => v.healthy);
}

/**
 * Write `text` (latin1: one char per byte) on a fresh socket to `url`'s host and collect everything
 * until the server closes it (or `waitMs` passes); `firstByteMs` is when the answer began (Infinity if none).
 */
export async function rawExchange(url: string, text: string, waitMs: number): Promise<{ response: string; closedByServer: boolean; ms: number; firstByteMs: number }> {
  const { hostname, port } = new URL(url);
  const socket: Socket = connect(Number(port), hostname);
  const started = realClock.now();
  let response = "";
  let firstByteMs = Infinity;
  socket.setEncoding("latin1");
  socket.on("data", (d: string) => {
    if (response === "") firstByteMs = realClock.now() - started;
    response += d;
  });
  socket.on("error", () => undefined);
  socket.write(text, "latin1");
  const closedByServer = await new Promise<boolean>((resolve) => {
    const timer = realClock.setTimer(waitMs, () => resolve(false));
    socket.on("close", () => {
      timer.cancel();
      resolve(true);
    });
  });
  socket.destroy();
  return { response, closedByServer, ms: realClock.now() - started, firstByteMs };
}

/** The JSON body of a raw HTTP response. */
export function rawJson(response: string): unknown {
  const at = response.indexOf("\r\n\r\n");
  return JSON.parse(Buffer.from(response.slice(at + 4), "latin1").toString("utf8"));
}
