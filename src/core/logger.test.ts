// The process logger: plain lines in text format (the commands' output unchanged), pino's JSON lines in
// json format, levels filtering, the environment's choice, and Fastify's request logs only at debug.
import Fastify from "fastify";
import { describe, expect, it } from "vitest";
import { createLogger, fastifyLogger, lineLog, loggerOptionsFromEnv } from "./logger.js";

/** A logger writing into an array of lines. */
function captured(o: Parameters<typeof createLogger>[0] = {}) {
  const lines: string[] = [];
  const logger = createLogger({ ...o, destination: { write: (l: string) => lines.push(l) } });
  return { logger, lines };
}

describe("createLogger", () => {
  it("text: each message as its own plain line, below-level messages dropped", () => {
    const { logger, lines } = captured();
    const log = lineLog(logger.child({ component: "run" }));
    log("engine   http://127.0.0.1:1234 (e0)");
    logger.debug("hidden");
    logger.error({ err: new Error("disk full") }, "store write failed");
    expect(lines).toEqual(["engine   http://127.0.0.1:1234 (e0)\n", "store write failed: disk full\n"]);
  });

  it("json: pino's lines with level, time, component and message", () => {
    const { logger, lines } = captured({ format: "json", level: "debug" });
    logger.child({ component: "gateway" }).debug("draining");
    expect(lines).toHaveLength(1);
    const rec = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(rec).toMatchObject({ level: 20, component: "gateway", msg: "draining", pid: process.pid });
    expect(typeof rec.time).toBe("number");
  });

  it("reads ARBOR_LOG_LEVEL / ARBOR_LOG_FORMAT and refuses unknown values naming them", () => {
    expect(loggerOptionsFromEnv({ ARBOR_LOG_LEVEL: "warn", ARBOR_LOG_FORMAT: "json" })).toEqual({ level: "warn", format: "json" });
    expect(loggerOptionsFromEnv({})).toEqual({});
    expect(() => createLogger({ level: "loud" as "info" })).toThrow(/log level: must be one of fatal, error, warn, info, debug, trace, silent, got 'loud'/);
    expect(() => createLogger({ format: "xml" as "json" })).toThrow(/log format: must be text or json, got 'xml'/);
  });

  it("Fastify says where it listens only at debug (the service's own line says it), and passes its warnings", async () => {
    for (const level of ["info", "debug", "error"] as const) {
      const { logger, lines } = captured({ level });
      const app = Fastify({ ...fastifyLogger(logger) });
      await app.listen({ host: "127.0.0.1", port: 0 });
      app.log.warn("a warning");
      await app.close();
      expect(lines.some((l) => l.startsWith("Server listening at http://127.0.0.1:")), level).toBe(level === "debug");
      expect(lines.some((l) => l.startsWith("a warning")), level).toBe(level !== "error");
    }
  });

  it("Fastify logs requests only at debug and below, and warns of nothing deprecated", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.message);
    process.on("warning", onWarning);
    for (const level of ["info", "debug"] as const) {
      const { logger, lines } = captured({ format: "json", level });
      const app = Fastify({ ...fastifyLogger(logger) });
      app.get("/x", async () => ({ ok: true }));
      await app.inject({ method: "GET", url: "/x" });
      await app.close();
      const requests = lines.map((l) => JSON.parse(l) as { msg: string }).filter((r) => r.msg === "incoming request");
      expect(requests.length, level).toBe(level === "debug" ? 1 : 0);
    }
    expect(fastifyLogger(undefined)).toEqual({ logger: false });
    // Process warnings are emitted on the next tick.
    await new Promise((resolve) => process.nextTick(resolve));
    process.off("warning", onWarning);
    expect(warnings.filter((w) => w.includes("deprecated"))).toEqual([]);
  });
});
