// Before `arbor run` loads anything (engines take seconds to load their models), every fixed port
// the run config names is tried: a port in use, or one named twice, fails at once with a line that
// names the port and what it was for, instead of `listen EADDRINUSE` after the engines loaded.
import { createServer } from "node:net";
import type { RunConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";

/** A port the run will listen on. */
export interface WantedPort {
  /** The config field, e.g. `gateway.port`, `engines[1].port`. */
  what: string;
  host: string;
  port: number;
}

/** The fixed (non-zero) ports of a run config: gateway, in-process engines, external trainer. */
export function runPorts(cfg: RunConfig): WantedPort[] {
  const ports: WantedPort[] = [{ what: "gateway.port", host: cfg.gateway.host, port: cfg.gateway.port }];
  cfg.engines.forEach((e, i) => ports.push({ what: `engines[${i}].port (engine '${e.name}')`, host: "127.0.0.1", port: e.port }));
  const ext = cfg.train?.external;
  if (ext) ports.push({ what: "train.external.port", host: ext.host, port: ext.port });
  return ports.filter((p) => p.port !== 0);
}

/** Throw an ArborError naming the first port that is taken (or named twice); resolves when all are free. */
export async function checkPortsFree(ports: readonly WantedPort[]): Promise<void> {
  const seen = new Map<number, string>();
  for (const p of ports) {
    const other = seen.get(p.port);
    if (other !== undefined) throw new ArborError(`${p.what}: port ${p.port} is also ${other}; give each server its own port (or 0 for any free one)`, "config");
    seen.set(p.port, p.what);
  }
  for (const p of ports) {
    const problem = await tryListen(p.host, p.port);
    if (problem !== undefined) {
      const why = problem === "EADDRINUSE" ? "is already in use" : problem === "EACCES" ? "needs privileges this process lacks" : `cannot be used (${problem})`;
      throw new ArborError(`${p.what}: port ${p.port} on ${p.host} ${why}; stop what holds it, pick another port, or use 0 for any free one`, "config");
    }
  }
}

/** Listen on host:port and close again; the error code when that fails. */
function tryListen(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}
