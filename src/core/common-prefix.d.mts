// Types of common-prefix.mjs.

/** How many leading elements `a` and `b` (arrays or typed arrays of ids) share, at most `cap` (default: no cap). */
export function commonPrefix(a: ArrayLike<number>, b: ArrayLike<number>, cap?: number): number;
