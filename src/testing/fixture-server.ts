// A tiny HTTP server for adapter tests: answers every request through one handler (usually from the
// JSON samples in fixtures/), records what arrived, and can hold POSTs to test aborts.
import Fastify from "fastify";

export interface FixtureRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  body: unknown;
}

export interface FixtureReply {
  status?: number;
  json?: unknown;
  text?: string;
}

export interface FixtureServer {
  /** http://127.0.0.1:port (no trailing slash). */
  readonly root: string;
  readonly requests: FixtureRequest[];
  /** Hold every POST until {@link FixtureServer.release}. */
  hold(): void;
  release(): void;
  /** Resolves once at least `n` requests have arrived. */
  waitForRequests(n: number): Promise<void>;
  close(): Promise<void>;
}

/** Start a fixture server on 127.0.0.1 with an ephemeral port; unknown routes answer 404. */
export async function startFixtureServer(handler: (req: FixtureRequest) => FixtureReply | undefined): Promise<FixtureServer> {
  const requests: FixtureRequest[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  let gate: Promise<void> | undefined;
  let open: () => void = () => {};
  const app = Fastify({ logger: false, forceCloseConnections: true });
  app.route({
    method: ["GET", "POST"],
    url: "/*",
    handler: async (req, reply) => {
      const u = new URL(req.url, "http://fixture");
      const r: FixtureRequest = { method: req.method, path: u.pathname, query: Object.fromEntries(u.searchParams), body: req.body ?? null };
      requests.push(r);
      for (const w of waiters.filter((x) => requests.length >= x.n)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
      if (gate && req.method === "POST") await gate;
      const out = handler(r) ?? { status: 404, json: { error: { message: `fixture: no route for ${r.method} ${r.path}`, type: "not_found", code: 404 } } };
      reply.code(out.status ?? 200);
      if (out.text !== undefined) return reply.type("text/plain; version=0.0.4").send(out.text);
      return reply.send(out.json ?? {});
    },
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === "string") throw new Error("fixture server: no TCP address");
  const release = () => {
    gate = undefined;
    open();
  };
  return {
    root: `http://127.0.0.1:${addr.port}`,
    requests,
    hold() {
      gate ??= new Promise((r) => (open = r));
    },
    release,
    waitForRequests(n) {
      if (requests.length >= n) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ n, resolve }));
    },
    async close() {
      release();
      await app.close();
    },
  };
}
