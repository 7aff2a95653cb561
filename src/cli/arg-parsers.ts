// Commander argument parsers shared by the commands: each refuses a value outside its range with commander's
// InvalidArgumentError, which prints the option's name beside the reason (`option '--steps <n>' argument '0'
// is invalid. must be an integer >= 1, got 0`) before the command starts.
import { InvalidArgumentError } from "commander";

/**
 * A parser of integers within [min, max] (Number() alone would take "1.5" or "" as given); `range` says which in
 * the message (absent: any integer).
 */
function intIn(min: number, max: number, range?: string): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (v.trim() === "" || !Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(range === undefined ? `not an integer: ${v}` : `must be ${range}, got ${v}`);
    return n;
  };
}

/** An integer. */
export const toInt = intIn(-Infinity, Infinity);

/** An integer >= 1: a count where none would mean nothing is done (steps, tasks, a batch's size). */
export const toPositiveInt = intIn(1, Infinity, "an integer >= 1");

/** An integer >= 0. */
export const toNonNegativeInt = intIn(0, Infinity, "an integer >= 0");

/** A finite number (Number() alone reads "abc" as NaN and "" as 0, which would run on as if given). */
export function toNumber(v: string): number {
  const n = Number(v);
  if (v.trim() === "" || !Number.isFinite(n)) throw new InvalidArgumentError(`not a number: ${v}`);
  return n;
}

/** A finite number > 0 (a learning rate). */
export function toPositiveNumber(v: string): number {
  const n = toNumber(v);
  if (!(n > 0)) throw new InvalidArgumentError(`must be a number > 0, got ${v}`);
  return n;
}

/** A port (0: any free port). */
export const toPort = intIn(0, 65535, "a port number 0-65535");
