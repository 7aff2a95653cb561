// Test helper: a TCP proxy in front of a host:port (a database, a broker) that a test can cut on cue —
// every open connection destroyed at once and new ones refused for a while, as a network partition or a
// restarting server looks to a client — and that forwards bytes unchanged otherwise.
import { createServer, connect, type AddressInfo, type Socket } from "node:net";
import type { Clock, Timer } from "../core/clock.js";
import { realClock } from "../core/real-clock.js";

export interface TcpFaultProxy {
  /** The port the proxy listens on (127.0.0.1). */
  readonly port: number;
  /** host:port the proxy forwards to. */
  readonly target: string;
  /** Connections destroyed by {@link cut} so far. */
  readonly connectionsCut: number;
  /** Connections refused (destroyed on accept) while cut. */
  readonly connectionsRefused: number;
  /** Connections accepted and forwarded so far. */
  readonly connectionsForwarded: number;
  /** Connections open now (client side). */
  readonly open: number;
  /** Whether the proxy is refusing connections now. */
  readonly isCut: boolean;
  /**
   * Destroy every open connection now and refuse new ones for `ms`, then forward again; resolves when
   * forwarding resumes. A second cut while cut extends the outage to the later end.
   */
  cut(ms: number): Promise<void>;
  /** Stop listening and destroy every connection. */
  close(): Promise<void>;
}

/** Start a proxy on an ephemeral port of 127.0.0.1 forwarding to `host:port`; `clock` times the cuts. */
export async function startTcpFaultProxy(host: string, port: number, clock: Clock = realClock): Promise<TcpFaultProxy> {
  const pairs = new Set<{ client: Socket; upstream: Socket }>();
  let cutUntil = 0;
  let cutTimer: Timer | undefined;
  let resumed: Promise<void> = Promise.resolve();
  let resume: (() => void) | undefined;
  const counts = { cut: 0, refused: 0, forwarded: 0 };

  const server = createServer((client) => {
    if (cutTimer !== undefined) {
      // Refused: the client sees its connection reset right after connecting, as with a dropped route.
      counts.refused++;
      client.destroy();
      return;
    }
    counts.forwarded++;
    const upstream = connect({ host, port });
    const pair = { client, upstream };
    pairs.add(pair);
    const drop = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop);
    upstream.on("error", drop);
    client.on("close", drop);
    upstream.on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const listenPort = (server.address() as AddressInfo).port;

  return {
    port: listenPort,
    target: `${host}:${port}`,
    get connectionsCut() {
      return counts.cut;
    },
    get connectionsRefused() {
      return counts.refused;
    },
    get connectionsForwarded() {
      return counts.forwarded;
    },
    get open() {
      return pairs.size;
    },
    get isCut() {
      return cutTimer !== undefined;
    },
    cut(ms) {
      if (!Number.isFinite(ms) || ms < 0) throw new Error(`cut: ms must be a finite number >= 0, got ${ms}`);
      for (const p of [...pairs]) {
        counts.cut++;
        pairs.delete(p);
        // resetAndDestroy sends an RST, as a broken link does, rather than a clean FIN.
        p.client.resetAndDestroy();
        p.upstream.destroy();
      }
      const end = clock.now() + ms;
      if (cutTimer !== undefined && end <= cutUntil) return resumed;
      if (cutTimer !== undefined) cutTimer.cancel();
      else resumed = new Promise<void>((r) => (resume = r));
      cutUntil = end;
      cutTimer = clock.setTimer(ms, () => {
        cutTimer = undefined;
        resume?.();
      });
      return resumed;
    },
    async close() {
      cutTimer?.cancel();
      cutTimer = undefined;
      resume?.();
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      pairs.clear();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
