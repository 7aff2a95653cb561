// The tracking sinks' shared transport: which answers are retried, which refused at once, and the bounded
// background queue's drops and failures.
import { describe, expect, it } from "vitest";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { TrackingQueue, trackingRequest, type TrackingSinkOptions } from "./tracking-transport.js";

function answering(...answers: [number, string][]): { fetch: typeof fetch; calls: () => number } {
  let n = 0;
  const f = (async () => {
    const [status, body] = answers[Math.min(n++, answers.length - 1)]!;
    return new Response(body, { status });
  }) as typeof fetch;
  return { fetch: f, calls: () => n };
}

const opts = (f: typeof fetch, attempts = 3): TrackingSinkOptions => ({ clock: realClock, log: () => {}, fetch: f, attempts });
const req = { method: "POST" as const, url: "http://tracker/x", headers: {}, body: { a: 1 }, what: "T x" };

describe("trackingRequest", () => {
  it("retries a 5xx and answers the JSON that follows; a non-JSON 200 answers {}", async () => {
    const a = answering([503, "busy"], [200, '{"ok":true}']);
    await expect(trackingRequest(opts(a.fetch), req)).resolves.toEqual({ ok: true });
    expect(a.calls()).toBe(2);
    await expect(trackingRequest(opts(answering([200, "<html>"]).fetch), req)).resolves.toEqual({});
  });

  it("refuses a 4xx at once as a config error, unless the request accepts it", async () => {
    const a = answering([401, "no key"]);
    const e = await trackingRequest(opts(a.fetch), req).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ArborError);
    expect((e as ArborError).code).toBe("config");
    expect((e as Error).message).toBe("T x: 401 no key");
    expect(a.calls()).toBe(1);
    const accepted = await trackingRequest(opts(answering([404, '{"error_code":"GONE"}']).fetch), { ...req, accept: (s, j) => (s === 404 && j.error_code === "GONE" ? { value: "missing" } : undefined) });
    expect(accepted).toBe("missing");
  });
});

describe("TrackingQueue", () => {
  it("posts in batches, drops the oldest past its bound and counts failed batches", async () => {
    const sent: number[][] = [];
    const logged: string[] = [];
    let droppedSeen = 0;
    let fail = false;
    const q = new TrackingQueue<number>({
      max: 3,
      batch: 2,
      send: async (xs) => {
        await Promise.resolve();
        if (fail) throw new Error("down");
        sent.push(xs);
      },
      log: (n, e) => logged.push(`${n}: ${e.message}`),
      onDrop: (n) => (droppedSeen += n),
    });
    q.push(1, 2, 3, 4, 5);
    await q.flush();
    expect(sent).toEqual([[3, 4], [5]]);
    expect(q.dropped).toBe(2);
    expect(droppedSeen).toBe(2);
    fail = true;
    q.push(6);
    await q.flush();
    expect(q.failed).toBe(1);
    expect(logged).toEqual(["1: down"]);
  });
});
