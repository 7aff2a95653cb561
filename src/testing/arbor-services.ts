// Test support for Arbor's services as separate processes (`arbor serve …`, `arbor run --cluster`): spawn one
// with its log captured, find a free port, wait for readiness, and the NATS test server's reachability and
// clean-up of a test deployment's streams.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { realClock } from "../core/real-clock.js";

export { freePort } from "../core/free-port.js";

const root = join(import.meta.dirname, "../..");

/** The NATS server the tests use (JetStream on). */
export const NATS_TEST_URL = "nats://127.0.0.1:4222";

export interface ArborProcess {
  child: ChildProcessWithoutNullStreams;
  /** Everything it printed so far (stdout and stderr). */
  log(): string;
  exited: Promise<number | null>;
}

/** Start `arbor <args>` from the repository root. */
export function spawnArbor(args: string[], env: Record<string, string> = {}): ArborProcess {
  const child = spawn(process.execPath, [join(root, "bin/arbor.mjs"), ...args], { cwd: root, env: { ...process.env, ...env } });
  let log = "";
  child.stderr.on("data", (d: Buffer) => (log += d.toString()));
  child.stdout.on("data", (d: Buffer) => (log += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
  return { child, log: () => log, exited };
}

/** GET /readyz. */
export async function readyz(base: string): Promise<{ status: number; body: { status?: string; reason?: string } }> {
  const r = await fetch(`${base}/readyz`);
  return { status: r.status, body: (await r.json()) as { status?: string; reason?: string } };
}

/** Poll /readyz until 200 (bounded: 90 s, then fail with the service's log). */
export async function waitReady(base: string, svc: ArborProcess): Promise<void> {
  const started = realClock.now();
  let last = "";
  while (realClock.now() - started < 90_000) {
    if (svc.child.exitCode !== null) throw new Error(`${base}: the service exited (${svc.child.exitCode}); log:\n${svc.log()}`);
    try {
      const r = await readyz(base);
      if (r.status === 200) return;
      last = JSON.stringify(r.body);
    } catch (e) {
      last = e instanceof Error ? e.message : String(e);
    }
    await new Promise((r) => globalThis.setTimeout(r, 200));
  }
  throw new Error(`${base} not ready after 90 s (last: ${last}); log:\n${svc.log()}`);
}

/** Why NATS cannot be used by the tests, or undefined when it can. */
export async function natsUnreachable(): Promise<string | undefined> {
  try {
    const nc = await connect({ servers: NATS_TEST_URL, timeout: 1000, reconnect: false });
    await nc.close();
    return undefined;
  } catch (e) {
    return `NATS at ${NATS_TEST_URL} is unreachable (${e instanceof Error ? e.message : String(e)})`;
  }
}

/** Delete the JetStream streams whose names start with `prefix` (a test deployment's). */
export async function deleteStreams(prefix: string): Promise<void> {
  const nc = await connect({ servers: NATS_TEST_URL, timeout: 2000, reconnect: false });
  try {
    const jsm = await jetstreamManager(nc);
    for await (const s of jsm.streams.list()) if (s.config.name.startsWith(prefix)) await jsm.streams.delete(s.config.name);
  } finally {
    await nc.close();
  }
}
