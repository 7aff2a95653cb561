// A TCP port to hand to a process that will listen on it later (a service spawned with a cluster file
// naming its port). Asking the kernel for port 0 and closing it gives a port from the ephemeral range,
// which the kernel hands out again to anyone: another process binding port 0, or any outgoing
// connection, can take it before our child listens (CI saw `listen EADDRINUSE` that way). So the port is
// drawn at random from below the ephemeral range, where the kernel never allocates on its own, and tried
// with a bind before it is returned; a process never gets the same port twice.
import { randomInt } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { ArborError } from "./errors.js";

/** Linux's default when /proc is not readable. */
const DEFAULT_EPHEMERAL_LOW = 32768;
/** The ports just below the ephemeral range, left to ports that must stay closed (tests of an unreachable backend). */
export const CLOSED_PORT_SPAN = 2000;
/** How many ports below those the draw covers. */
const SPAN = 16384;
/** Tries before giving up (each a bind on a random port). */
const MAX_TRIES = 200;

const handedOut = new Set<number>();

/** The lowest port of the kernel's ephemeral range (Linux), or its default elsewhere. */
export function ephemeralLow(rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"): number {
  try {
    const low = Number(readFileSync(rangeFile, "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 0 ? low : DEFAULT_EPHEMERAL_LOW;
  } catch {
    return DEFAULT_EPHEMERAL_LOW;
  }
}

/**
 * A port on `host` that is free now and below the kernel's ephemeral range (so no port-0 bind or outgoing
 * connection takes it meanwhile), never one this process was given before. Falls back to a kernel-chosen
 * port where the ephemeral range leaves no room below it. Throws after 200 taken ports. `pick(low, high)`
 * draws a port in [low, high) (crypto's randomInt: parallel processes draw independently).
 */
export async function freePort(host = "127.0.0.1", pick: (low: number, high: number) => number = randomInt): Promise<number> {
  const high = ephemeralLow() - CLOSED_PORT_SPAN;
  const low = Math.max(1024, high - SPAN);
  if (high - low < 1024) return kernelPort(host);
  for (let i = 0; i < MAX_TRIES; i++) {
    const port = pick(low, high);
    if (handedOut.has(port)) continue;
    if ((await listenOnce(host, port)) === port) {
      handedOut.add(port);
      return port;
    }
  }
  throw new ArborError(`no free port on ${host} in ${low}-${high - 1} after ${MAX_TRIES} tries`, "internal");
}

/** The port the kernel picks for a bind to port 0 (in the ephemeral range). */
async function kernelPort(host: string): Promise<number> {
  const port = await listenOnce(host, 0);
  if (port === undefined) throw new ArborError(`cannot bind any port on ${host}`, "internal");
  return port;
}

/** Listen on `port` and close again: the bound port, or undefined when the bind failed. */
function listenOnce(host: string, port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(undefined));
    srv.listen(port, host, () => {
      const a = srv.address();
      srv.close(() => resolve(typeof a === "object" && a ? a.port : undefined));
    });
  });
}
