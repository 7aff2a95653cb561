// A bare HTTP relay for `arbor bench gateway`: the gateway's own HTTP stack (a Fastify server answering, the
// token backends' upstream client, backends/http-text.ts, forwarding) with none of the gateway's logic. Each POST
// body goes on to the upstream as it came and the upstream's answer comes back as it came. Its added latency
// over a direct call is what any gateway on this stack adds on this machine (the extra hop: two more socket
// writes and process wake-ups per call, HTTP parsing on both sides), so the bench can tell that floor from the
// gateway's own work.
import Fastify from "fastify";
import { httpBase, httpText } from "../backends/http-text.js";

/** A listening relay. */
export interface HttpRelay {
  /** Its base URL (http://host:port, no trailing slash). */
  readonly url: string;
  close(): Promise<void>;
}

/** Largest request body the relay forwards, bytes (the bench's conversations are a few KB). */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

/**
 * Start a relay on 127.0.0.1 (an ephemeral port) forwarding every POST to `upstreamRoot` + its path. An
 * upstream that cannot be reached is answered with HTTP 502 naming it.
 */
export async function startHttpRelay(upstreamRoot: string): Promise<HttpRelay> {
  const root = upstreamRoot.replace(/\/+$/, "");
  const base = httpBase(root);
  const app = Fastify({ logger: false, bodyLimit: MAX_BODY_BYTES });
  // The body stays text: parsing it is gateway work, which this relay is there to leave out.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "string" }, (_req, body, done) => done(null, body));
  app.post("/*", async (req, reply) => {
    try {
      const res = await httpText(base, "POST", req.url, req.body as string, { "content-type": req.headers["content-type"] ?? "application/json" });
      if (res.contentType !== undefined) reply.header("content-type", res.contentType);
      return reply.code(res.status).send(res.text);
    } catch (e) {
      return reply.code(502).send({ error: { message: `relay: upstream ${root} unreachable: ${e instanceof Error ? e.message : String(e)}` } });
    }
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { url, close: () => app.close() };
}
