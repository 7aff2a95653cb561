// Tests of one engine exchange read whole as text: paths under the base's prefix, status and content type, the body decoded as
// undici's body.text() does, aborts (before and after the connection) rejecting with their reason at once, and
// an unreachable engine rejecting with the socket's error.
import Fastify, { type FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpBase, httpText, ResponseTooLargeError } from "./http-text.js";

let app: FastifyInstance;
let root: string;
const never: (() => void)[] = [];

beforeAll(async () => {
  app = Fastify({ logger: false });
  app.get("/pre/v1/echo", async (req, reply) => reply.type("text/plain").send(`GET ${req.url} accept=${String(req.headers.accept)}`));
  app.post("/pre/v1/echo", async (req, reply) => reply.code(201).type("text/plain").send(`POST ${req.headers["content-type"]} ${JSON.stringify(req.body)}`));
  // A long multi-byte answer (written in several chunks) behind a byte order mark.
  app.get("/pre/bom", async (_req, reply) => reply.type("text/plain").send(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("é🙂".repeat(20_000))])));
  app.get("/pre/never", (_req, reply) => new Promise<void>((resolve) => never.push(() => resolve(void reply.send("late")))));
  root = `${await app.listen({ host: "127.0.0.1", port: 0 })}/pre`;
});

afterAll(async () => {
  for (const f of never.splice(0)) f();
  await app.close();
});

describe("httpText", () => {
  it("sends under the base's path prefix and answers status and text", async () => {
    const base = httpBase(`${root}/`);
    expect(base.prefix).toBe("/pre");
    const get = await httpText(base, "GET", "/v1/echo?x=1", undefined, { accept: "text/plain" });
    expect(get).toEqual({ status: 200, text: "GET /pre/v1/echo?x=1 accept=text/plain", contentType: "text/plain" });
    const post = await httpText(base, "POST", "/v1/echo", '{"a":[1,2]}', { "content-type": "application/json" });
    expect(post).toEqual({ status: 201, text: 'POST application/json {"a":[1,2]}', contentType: "text/plain" });
    expect(await httpText(base, "GET", "/v1/missing", undefined, {})).toMatchObject({ status: 404 });
  });

  it("cuts an answer longer than its bound and says so", async () => {
    const long = httpText(httpBase(root), "GET", "/bom", undefined, {}, undefined, 1000);
    await expect(long).rejects.toBeInstanceOf(ResponseTooLargeError);
    await expect(long).rejects.toThrow("the answer to GET /bom is longer than 1000 bytes");
    // The connection pool is fine afterwards.
    expect((await httpText(httpBase(root), "GET", "/v1/echo", undefined, {})).status).toBe(200);
  });

  it("decodes the whole body as UTF-8 without its byte order mark", async () => {
    const r = await httpText(httpBase(root), "GET", "/bom", undefined, {});
    expect(r.text).toBe("é🙂".repeat(20_000));
  });

  it("rejects with the abort's reason, whether it comes before the connection or while waiting for the answer", async () => {
    const base = httpBase(root);
    const early = new AbortController();
    const p = httpText(base, "GET", "/never", undefined, {}, early.signal);
    early.abort(new Error("stop now"));
    await expect(p).rejects.toThrow("stop now");
    const late = new AbortController();
    const q = httpText(base, "GET", "/never", undefined, {}, late.signal);
    await new Promise((r) => setTimeout(r, 50));
    late.abort(new Error("gave up"));
    await expect(q).rejects.toThrow("gave up");
    const done = new AbortController();
    done.abort(new Error("already"));
    await expect(httpText(base, "GET", "/v1/echo", undefined, {}, done.signal)).rejects.toThrow("already");
  });

  it("rejects with the socket's error when nothing listens", async () => {
    const dead = Fastify({ logger: false });
    const url = await dead.listen({ host: "127.0.0.1", port: 0 });
    await dead.close();
    await expect(httpText(httpBase(url), "GET", "/", undefined, {})).rejects.toMatchObject({ code: "ECONNREFUSED" });
  });
});
