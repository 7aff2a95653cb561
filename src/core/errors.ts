// User-facing errors: one line, naming the problem, printed without a stack trace by the CLI.

/** An error whose message is meant for the user as-is (bad config, unreachable backend, ...). */
export class ArborError extends Error {
  constructor(
    message: string,
    /** Short machine-readable code, e.g. "config", "backend_unreachable". */
    readonly code: string = "arbor",
  ) {
    super(message);
    this.name = "ArborError";
  }
}

/** The shell's exit code for a command ended by a signal: 128 + the signal's number. */
export const SIGNAL_EXIT: Readonly<Record<"SIGINT" | "SIGTERM", number>> = { SIGINT: 130, SIGTERM: 143 };

/** A command stopped by a signal (code "aborted"): the CLI exits with the shell's code for it, 128 + its number. */
export class SignalledError extends ArborError {
  constructor(
    message: string,
    readonly signal: "SIGINT" | "SIGTERM",
  ) {
    super(message, "aborted");
  }
}

/** Raised when a bounded queue or pool is at its limit. */
export class CapacityError extends ArborError {
  constructor(what: string, limit: number) {
    super(`${what} is full (limit ${limit})`, "capacity");
  }
}
