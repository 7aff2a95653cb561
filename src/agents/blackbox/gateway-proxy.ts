// The host side of a black-box sandbox's only way out: an HTTP proxy on a Unix socket inside the
// program's workspace (the one host path the sandbox sees) that forwards to the gateway, and only
// to this program's own endpoints (/p/{programId}/v1/...). Everything else is refused here, so
// the sandbox reaches neither other programs nor the gateway's admin routes, even with no auth.
import { closeSync, chmodSync, openSync, unlinkSync } from "node:fs";
import http from "node:http";
import { basename, dirname } from "node:path";
import { ArborError } from "../../core/errors.js";

export interface GatewayProxyOptions {
  /** Where the socket is created (inside the workspace; any length). */
  socketPath: string;
  /** Gateway origin, e.g. http://127.0.0.1:8080 (plain HTTP). */
  gatewayUrl: string;
  programId: string;
  /** Inference calls allowed (the black box's turn limit); later ones get 429 (default: no limit). */
  maxCalls?: number;
  /**
   * Generated tokens allowed, as the gateway's answers report them (`usage.completion_tokens` /
   * Anthropic `usage.output_tokens` of JSON answers); once reached, later calls get 429.
   */
  maxTotalTokens?: number;
  /** Connections open at once at most (default 64). */
  maxConnections?: number;
}

export interface ProxyStats {
  /** Requests forwarded to the gateway. */
  forwarded: number;
  /** Requests refused here (wrong path, over the call limit). */
  refused: number;
  /** True once a call was refused for the call limit. */
  callLimitHit: boolean;
  /** True once a call was refused for the token limit. */
  tokenLimitHit: boolean;
  /** Generated tokens reported by the JSON answers so far. */
  generatedTokens: number;
  /** Status of the last forwarded response (0: none, or the gateway could not be reached). */
  lastStatus: number;
  /** Forwarded requests answered 5xx or not at all. */
  upstreamFailures: number;
}

/** Largest answer whose usage is read, bytes. */
const MAX_COUNTED_BODY = 8 * 1024 * 1024;
const INFERENCE = /\/v1\/(chat\/completions|completions|responses|messages)(\?|$)/;

/** A per-program proxy; `start()` binds the socket, `close()` removes it. */
export class GatewayProxy {
  readonly stats: ProxyStats = { forwarded: 0, refused: 0, callLimitHit: false, tokenLimitHit: false, generatedTokens: 0, lastStatus: 0, upstreamFailures: 0 };
  private readonly server: http.Server;
  private readonly upstream: URL;
  private readonly prefix: string;
  private calls = 0;
  private dirFd: number | undefined;

  constructor(private readonly o: GatewayProxyOptions) {
    this.upstream = new URL(o.gatewayUrl);
    if (this.upstream.protocol !== "http:") throw new ArborError(`blackbox: gatewayUrl must be http://, got ${o.gatewayUrl}`, "config");
    this.prefix = `/p/${encodeURIComponent(o.programId)}/v1/`;
    this.server = http.createServer((req, res) => this.handle(req, res));
    this.server.maxConnections = o.maxConnections ?? 64;
  }

  /** Listen on the socket (mode 0666: the sandbox may run as another uid). */
  async start(): Promise<void> {
    // A workspace path can exceed the 108 bytes of a socket address: bind through a short
    // /proc/self/fd path to the directory instead. The fd stays open until close() (see there).
    this.dirFd = openSync(dirname(this.o.socketPath), "r");
    const shortPath = `/proc/self/fd/${this.dirFd}/${basename(this.o.socketPath)}`;
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(shortPath, () => {
        this.server.off("error", reject);
        resolve();
      });
    });
    chmodSync(this.o.socketPath, 0o666);
  }

  /** Stop accepting, cut open connections, remove the socket. Idempotent. */
  async close(): Promise<void> {
    if (this.dirFd === undefined) return;
    this.server.closeAllConnections();
    // libuv unlinks the bound (/proc/self/fd) path on close: the directory fd must still be ours then.
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    try {
      unlinkSync(this.o.socketPath);
    } catch {
      // already gone (unlinked on close, or the workspace was removed)
    }
    closeSync(this.dirFd);
    this.dirFd = undefined;
  }

  /** Read the answer's usage as it streams past (bounded: a huge body is not counted). */
  private countTokens(body: http.IncomingMessage): void {
    const chunks: Buffer[] = [];
    let size = 0;
    body.on("data", (c: Buffer) => {
      size += c.length;
      if (size <= MAX_COUNTED_BODY) chunks.push(c);
    });
    body.on("end", () => {
      if (size > MAX_COUNTED_BODY) return;
      try {
        const usage = (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { usage?: { completion_tokens?: unknown; output_tokens?: unknown } }).usage;
        const n = usage?.completion_tokens ?? usage?.output_tokens;
        if (typeof n === "number" && Number.isFinite(n) && n > 0) this.stats.generatedTokens += n;
      } catch {
        // not JSON after all: nothing to count
      }
    });
  }

  private refuse(res: http.ServerResponse, status: number, code: string, message: string): void {
    this.stats.refused++;
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { message, type: "invalid_request_error", code } }));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = req.url ?? "";
    if (!path.startsWith(this.prefix) || path.includes("/../") || path.includes("/./")) {
      req.resume();
      return this.refuse(res, 403, "forbidden_path", `this sandbox may only call ${this.prefix}... (got ${path.slice(0, 200)})`);
    }
    const inference = req.method === "POST" && INFERENCE.test(path);
    if (inference) {
      if (this.o.maxCalls !== undefined && this.calls >= this.o.maxCalls) {
        this.stats.callLimitHit = true;
        req.resume();
        return this.refuse(res, 429, "call_limit", `program ${this.o.programId} reached its limit of ${this.o.maxCalls} model calls`);
      }
      if (this.o.maxTotalTokens !== undefined && this.stats.generatedTokens >= this.o.maxTotalTokens) {
        this.stats.tokenLimitHit = true;
        req.resume();
        return this.refuse(res, 429, "token_limit", `program ${this.o.programId} reached its limit of ${this.o.maxTotalTokens} generated tokens`);
      }
      this.calls++;
    }
    this.stats.forwarded++;
    const headers = { ...req.headers, host: this.upstream.host };
    const up = http.request(
      { hostname: this.upstream.hostname, port: this.upstream.port || 80, method: req.method, path, headers },
      (ur) => {
        const status = ur.statusCode ?? 502;
        this.stats.lastStatus = status;
        if (status >= 500) this.stats.upstreamFailures++;
        res.writeHead(status, ur.headers);
        ur.pipe(res);
        if (inference && status === 200 && String(ur.headers["content-type"] ?? "").includes("application/json")) this.countTokens(ur);
      },
    );
    up.on("error", (e) => {
      // Read the rest of the request so the client gets the answer, not a broken pipe.
      req.unpipe(up);
      req.resume();
      this.stats.lastStatus = 0;
      this.stats.upstreamFailures++;
      if (!res.headersSent) {
        res.writeHead(502, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `gateway unreachable: ${e.message}`, type: "server_error", code: "bad_gateway" } }));
      } else {
        res.destroy();
      }
    });
    // The agent hung up (or was killed): stop the call at the gateway too.
    res.on("close", () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  }
}
