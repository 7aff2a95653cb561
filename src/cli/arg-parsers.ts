// Commander argument parsers shared by the commands: each refuses a value outside its range with commander's
// InvalidArgumentError, which prints the option's name beside the reason (`option '--steps <n>' argument '0'
// is invalid. must be an integer >= 1, got 0`) before the command starts.
import { InvalidArgumentError } from "commander";

/** An integer (Number() alone would take "1.5" or "" as given). */
export function toInt(v: string): number {
  const n = Number(v);
  if (v.trim() === "" || !Number.isInteger(n)) throw new InvalidArgumentError(`not an integer: ${v}`);
  return n;
}

/** An integer >= 1: a count where none would mean nothing is done (steps, tasks, a batch's size). */
export function toPositiveInt(v: string): number {
  const n = Number(v);
  if (v.trim() === "" || !Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`must be an integer >= 1, got ${v}`);
  return n;
}

/** An integer >= 0. */
export function toNonNegativeInt(v: string): number {
  const n = Number(v);
  if (v.trim() === "" || !Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`must be an integer >= 0, got ${v}`);
  return n;
}

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
export function toPort(v: string): number {
  const n = Number(v);
  if (v.trim() === "" || !Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError(`must be a port number 0-65535, got ${v}`);
  return n;
}
