// Test helper: an HTTP proxy in front of a real engine that can make the engine look dead on cue —
// cut the connection of a matching request (a backend killed mid-call), hold it, or answer 5xx —
// while forwarding everything else unchanged.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type FaultMode = "forward" | "reset" | "hold" | "error500";

export interface FaultProxy {
  /** http://127.0.0.1:port (no trailing slash). */
  readonly root: string;
  /** The requests seen, in order (path and raw body). */
  readonly seen: { path: string; body: string }[];
  /** How requests whose path starts with `prefix` are treated from now on (default forward). */
  set(prefix: string, mode: FaultMode): void;
  /** The paths of held requests whose client went away before they were answered, in order. */
  readonly abandoned: string[];
  /** Resolves once a request with this path prefix is being held. */
  held(prefix: string): Promise<void>;
  /** Forward every held request now; resolves when their answers were written (or their clients were gone). */
  releaseHeld(): Promise<void>;
  close(): Promise<void>;
}

/** Start a proxy to `target` (an engine's root URL) on an ephemeral port. */
export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const modes: [string, FaultMode][] = [];
  const seen: { path: string; body: string }[] = [];
  const holding: { path: string; forward: () => Promise<void> }[] = [];
  const abandoned: string[] = [];
  const waiters: { prefix: string; resolve: () => void }[] = [];
  const modeOf = (path: string): FaultMode => modes.filter(([p]) => path.startsWith(p)).at(-1)?.[1] ?? "forward";

  async function forward(req: IncomingMessage, body: Buffer, res: ServerResponse): Promise<void> {
    try {
      const up = await fetch(target + (req.url ?? "/"), {
        method: req.method,
        headers: { "content-type": req.headers["content-type"] ?? "application/json" },
        body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
      });
      const text = Buffer.from(await up.arrayBuffer());
      if (res.destroyed) return;
      res.writeHead(up.status, { "content-type": up.headers.get("content-type") ?? "application/json" });
      res.end(text);
    } catch {
      res.destroy();
    }
  }

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = req.url ?? "/";
      const body = Buffer.concat(chunks);
      seen.push({ path, body: body.toString("utf8") });
      const mode = modeOf(path);
      if (mode === "reset") {
        req.socket.destroy();
        return;
      }
      if (mode === "error500") {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "engine crashed (fault proxy)", type: "internal_error", code: 500 } }));
        return;
      }
      if (mode === "hold") {
        holding.push({ path, forward: () => forward(req, body, res) });
        res.once("close", () => {
          if (!res.writableFinished) abandoned.push(path);
        });
        for (const w of waiters.filter((x) => path.startsWith(x.prefix))) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
        return;
      }
      void forward(req, body, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    root: `http://127.0.0.1:${port}`,
    seen,
    abandoned,
    set(prefix, mode) {
      modes.push([prefix, mode]);
    },
    held(prefix) {
      if (holding.some((h) => h.path.startsWith(prefix))) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ prefix, resolve }));
    },
    async releaseHeld() {
      const all = holding.splice(0);
      await Promise.all(all.map((h) => h.forward()));
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
