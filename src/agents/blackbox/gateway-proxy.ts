// The host side of a black-box sandbox's only way out: an HTTP proxy on a Unix socket inside the
// program's workspace (the one host path the sandbox sees) that forwards to the gateway, and only
// to this program's own endpoints (/p/{programId}/v1/...). Everything else is refused here, so
// the sandbox reaches neither other programs nor the gateway's admin routes, even with no auth.
import { closeSync, chmodSync, openSync, unlinkSync } from "node:fs";
import http from "node:http";
import { basename, dirname } from "node:path";
import { ArborError } from "../../core/errors.js";
import { MAX_TOKENS_ASKED_HEADER } from "../../gateway/admit-call.js";
import { AnswerUsageReader } from "./answer-usage.js";
import { capRequestTokens, inferenceRoute, type OverCapPolicy } from "./token-cap.js";

export interface GatewayProxyOptions {
  /** Where the socket is created (inside the workspace; any length). */
  socketPath: string;
  /** Gateway origin, e.g. http://127.0.0.1:8080 (plain HTTP). */
  gatewayUrl: string;
  programId: string;
  /** Inference calls allowed (the black box's turn limit); later ones get 429 (default: no limit). */
  maxCalls?: number;
  /**
   * Generated tokens allowed, as the gateway's answers report them (JSON `usage`, or the usage a
   * stream carries: see answer-usage.ts); once reached, later calls get 429.
   */
  maxTotalTokens?: number;
  /**
   * Tokens one call may generate (agent.maxTokensPerCall): each inference request's limit field is
   * lowered to it, or added when absent; over-cap requests are refused instead with `overCap: "refuse"`.
   */
  maxTokensPerCall?: number;
  /** What to do with a request asking for more than maxTokensPerCall (default "clamp"). */
  overCap?: OverCapPolicy;
  /** Largest inference request body read to apply maxTokensPerCall, bytes (default 32 MiB; larger: 413). */
  maxRequestBytes?: number;
  /** Connections open at once at most (default 64). */
  maxConnections?: number;
}

export interface ProxyStats {
  /** Requests forwarded to the gateway. */
  forwarded: number;
  /** Requests refused here (wrong path, over a limit, a body that cannot be capped). */
  refused: number;
  /** True once a call was refused for the call limit. */
  callLimitHit: boolean;
  /** True once a call was refused for the token limit. */
  tokenLimitHit: boolean;
  /** Generated tokens reported by the answers so far (JSON bodies and streams). */
  generatedTokens: number;
  /**
   * Answered inference calls (200) whose generated tokens could not be read: a chat stream without
   * `stream_options.include_usage`, an answer cut off or over the parse limit. maxTotalTokens does
   * not see their tokens.
   */
  uncountedCalls: number;
  /** Why the last uncounted call could not be counted (empty: none). */
  lastUncountedReason: string;
  /** Status of the last forwarded response (0: none, or the gateway could not be reached). */
  lastStatus: number;
  /** Forwarded requests answered 5xx, not at all, or cut off mid-answer by the gateway. */
  upstreamFailures: number;
  /** Inference requests whose generation limit was lowered to maxTokensPerCall. */
  clampedCalls: number;
  /** Inference requests that named no generation limit and got maxTokensPerCall added. */
  cappedCalls: number;
}

/** Largest JSON answer, or single SSE event, whose usage is read, bytes. */
const MAX_COUNTED_EVENT = 8 * 1024 * 1024;
const DEFAULT_MAX_REQUEST_BYTES = 32 * 1024 * 1024;

/** A per-program proxy; `start()` binds the socket, `close()` removes it. */
export class GatewayProxy {
  readonly stats: ProxyStats = { forwarded: 0, refused: 0, callLimitHit: false, tokenLimitHit: false, generatedTokens: 0, uncountedCalls: 0, lastUncountedReason: "", lastStatus: 0, upstreamFailures: 0, clampedCalls: 0, cappedCalls: 0 };
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
    const cap = o.maxTokensPerCall;
    if (cap !== undefined && !(Number.isInteger(cap) && cap >= 1)) throw new ArborError(`blackbox: maxTokensPerCall must be an integer >= 1, got ${cap}`, "config");
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

  /** Read the answer's usage as it streams past (bounded per event; the body is never held whole). */
  private countTokens(body: http.IncomingMessage): void {
    const reader = new AnswerUsageReader(String(body.headers["content-type"] ?? ""), { maxEventBytes: MAX_COUNTED_EVENT });
    let ended = false;
    body.on("data", (c: Buffer) => reader.push(c));
    body.on("end", () => {
      ended = true;
      const usage = reader.finish();
      if (usage.counted) this.stats.generatedTokens += usage.tokens;
      else this.uncounted(usage.reason);
    });
    // Cut off before its end (the gateway failed, or the agent hung up): its usage never came.
    body.on("close", () => {
      if (!ended) this.uncounted("answer ended before its end");
    });
  }

  private uncounted(reason: string): void {
    this.stats.uncountedCalls++;
    this.stats.lastUncountedReason = reason;
  }

  private refuse(res: http.ServerResponse, status: number, code: string, message: string, param?: string): void {
    this.stats.refused++;
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { message, type: "invalid_request_error", code, ...(param === undefined ? {} : { param }) } }));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = req.url ?? "";
    if (!path.startsWith(this.prefix) || path.includes("/../") || path.includes("/./")) {
      req.resume();
      return this.refuse(res, 403, "forbidden_path", `this sandbox may only call ${this.prefix}... (got ${path.slice(0, 200)})`);
    }
    const route = req.method === "POST" ? inferenceRoute(path) : undefined;
    const inference = route !== undefined;
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
      if (this.o.maxTokensPerCall !== undefined) return this.forwardCapped(req, res, path, route);
    }
    this.forward(req, res, path, inference);
  }

  /** Read the inference request, bound its generation limit, then forward it (or refuse it with 400). */
  private forwardCapped(req: http.IncomingMessage, res: http.ServerResponse, path: string, route: NonNullable<ReturnType<typeof inferenceRoute>>): void {
    const max = this.o.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
    // A refused request never reaches the model: it does not use up one of the program's calls.
    const refuse = (status: number, code: string, message: string, param?: string): void => {
      this.calls--;
      this.refuse(res, status, code, message, param);
    };
    const encoding = String(req.headers["content-encoding"] ?? "identity").toLowerCase();
    if (encoding !== "identity") {
      req.resume();
      return refuse(415, "unsupported_encoding", `content-encoding ${encoding} is not accepted: send the request body uncompressed`);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > max) over = true;
      else chunks.push(c);
    });
    req.on("error", () => res.destroy());
    req.on("end", () => {
      if (over) return refuse(413, "request_too_large", `request body of ${size} bytes is over this sandbox's limit of ${max} bytes`);
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        body = undefined;
      }
      if (typeof body !== "object" || body === null || Array.isArray(body)) return refuse(400, "invalid_body", "request body must be a JSON object");
      const capped = capRequestTokens(route, body as Record<string, unknown>, this.o.maxTokensPerCall as number, this.o.overCap ?? "clamp");
      if (!capped.ok) return refuse(400, "max_tokens_above_limit", capped.message, capped.field);
      if (capped.clamped.length > 0) this.stats.clampedCalls++;
      if (capped.added !== undefined) this.stats.cappedCalls++;
      this.forward(req, res, path, true, Buffer.from(JSON.stringify(capped.body), "utf8"), capped.asked);
    });
  }

  /**
   * Send the request on to the gateway: piped as it comes, or `body` when the proxy has rewritten it; `asked`: the
   * budget the agent asked for before the cap lowered it, told to the gateway (which records the clamp).
   */
  private forward(req: http.IncomingMessage, res: http.ServerResponse, path: string, inference: boolean, body?: Buffer, asked?: number): void {
    this.stats.forwarded++;
    const headers: http.OutgoingHttpHeaders = { ...req.headers, host: this.upstream.host };
    // Only the proxy says what the agent asked for.
    delete headers[MAX_TOKENS_ASKED_HEADER];
    if (asked !== undefined) headers[MAX_TOKENS_ASKED_HEADER] = String(asked);
    if (body !== undefined) {
      delete headers["transfer-encoding"];
      headers["content-length"] = String(body.length);
    }
    const up = http.request(
      { hostname: this.upstream.hostname, port: this.upstream.port || 80, method: req.method, path, headers },
      (ur) => {
        const status = ur.statusCode ?? 502;
        this.stats.lastStatus = status;
        if (status >= 500) this.stats.upstreamFailures++;
        res.writeHead(status, ur.headers);
        ur.pipe(res);
        // The gateway dropped the connection mid-answer: pipe() would leave the agent waiting on a
        // half-sent answer forever; cut its connection too, so it sees the failure.
        ur.on("close", () => {
          // Already destroyed: the agent hung up first (res's close handler below then cut this answer).
          if (ur.complete || res.destroyed) return;
          this.stats.upstreamFailures++;
          res.destroy();
        });
        if (inference && status === 200) this.countTokens(ur);
      },
    );
    up.on("error", (e) => {
      // Read the rest of the request so the client gets the answer, not a broken pipe.
      if (body === undefined) {
        req.unpipe(up);
        req.resume();
      }
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
    if (body === undefined) req.pipe(up);
    else up.end(body);
  }
}
