// Structured logs through pino (Fastify's logger): one logger per process, its level and format chosen
// by `arbor --log-level` / `--log-format` (or ARBOR_LOG_LEVEL / ARBOR_LOG_FORMAT). The `text` format (the
// default) writes each message as the plain line people read on a terminal, exactly as the commands always
// printed it; `json` writes pino's JSON lines (`level`, `time`, `component`, `msg`, …) for log collectors.
// Both go to stderr (stdout keeps the commands' results). Servers hand the same logger to Fastify, which logs
// requests only at `debug` and below (a gateway's every call at `info` would drown the rest).
import { LogController, type FastifyBaseLogger } from "fastify";
import { pino, type DestinationStream, type Logger } from "pino";
import { ArborError } from "./errors.js";

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ["text", "json"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export interface LoggerOptions {
  /** Lowest level written (default info). */
  level?: LogLevel;
  /** `text`: the message alone, one line each; `json`: pino's JSON lines (default text). */
  format?: LogFormat;
  /** Where lines go (default stderr). */
  destination?: { write(line: string): unknown };
}

/** pino's JSON line → the message alone (and the error's message when one is attached). */
function textLine(json: string): string {
  try {
    const o = JSON.parse(json) as { msg?: unknown; err?: { message?: unknown } };
    const msg = typeof o.msg === "string" ? o.msg : "";
    const err = o.err && typeof o.err.message === "string" && !msg.includes(o.err.message) ? `: ${o.err.message}` : "";
    return `${msg}${err}\n`;
  } catch {
    return json;
  }
}

/** A logger; see the file header. */
export function createLogger(o: LoggerOptions = {}): Logger {
  const level = o.level ?? "info";
  if (!LOG_LEVELS.includes(level)) throw new ArborError(`log level: must be one of ${LOG_LEVELS.join(", ")}, got '${String(level)}'`, "config");
  const format = o.format ?? "text";
  if (!LOG_FORMATS.includes(format)) throw new ArborError(`log format: must be text or json, got '${String(format)}'`, "config");
  const out = o.destination ?? process.stderr;
  const destination: DestinationStream = format === "json" ? { write: (line) => void out.write(line) } : { write: (line) => void out.write(textLine(line)) };
  return pino({ level, base: { pid: process.pid } }, destination);
}

/** The level and format named by ARBOR_LOG_LEVEL / ARBOR_LOG_FORMAT (set by the `arbor` command's options). */
export function loggerOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): LoggerOptions {
  const o: LoggerOptions = {};
  if (env.ARBOR_LOG_LEVEL) o.level = env.ARBOR_LOG_LEVEL as LogLevel;
  if (env.ARBOR_LOG_FORMAT) o.format = env.ARBOR_LOG_FORMAT as LogFormat;
  return o;
}

let processLogger: Logger | undefined;

/** This process's logger (created on first use from the environment), or one component's child of it. */
export function processLog(component?: string): Logger {
  processLogger ??= createLogger(loggerOptionsFromEnv());
  return component === undefined ? processLogger : processLogger.child({ component });
}

/** A `log(line)` callback of the kind Arbor's commands take, writing `info` lines to `logger`. */
export function lineLog(logger: Logger): (line: string) => void {
  return (line) => logger.info(line);
}

/**
 * Fastify's logger options for a server: the process's pino logger when given (requests, and Fastify's own info
 * lines, logged only at `debug` and below), else none.
 */
export function fastifyLogger(logger: Logger | undefined): { logger: false } | { loggerInstance: FastifyBaseLogger; logController: LogController } {
  if (!logger) return { logger: false };
  const debug = logger.isLevelEnabled("debug");
  // Above debug, Fastify's own info lines only repeat what the service says better (`Server listening at …` before
  // its fuller line): its warnings and errors pass. Typed as Fastify's base logger: the servers' route helpers take
  // the default logger type. Request logging is the log controller's (the top-level `disableRequestLogging` made
  // every service print a deprecation warning).
  const own = debug || !logger.isLevelEnabled("info") ? logger : logger.child({}, { level: "warn" });
  return { loggerInstance: own as FastifyBaseLogger, logController: new LogController({ disableRequestLogging: !debug }) };
}
