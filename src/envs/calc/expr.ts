// Integer arithmetic over + - * / and parentheses, with bc's semantics (scale 0: division truncates
// toward zero). Computes the calc tasks' expected answers independently of the tool.

/** Characters the calc tool accepts. */
export const CALC_ALLOWED = /^[0-9+\-*/() ]*$/;

/** Evaluate an integer expression; throws on syntax errors and division by zero. */
export function evalExpr(src: string): bigint {
  const tokens = src.match(/\d+|[+\-*/()]|\S/g) ?? [];
  let pos = 0;
  const peek = (): string | undefined => tokens[pos];
  const fail = (why: string): never => {
    throw new Error(`cannot evaluate '${src}': ${why}`);
  };

  function primary(): bigint {
    const t = tokens[pos++];
    if (t === undefined) return fail("unexpected end");
    if (/^\d+$/.test(t)) return BigInt(t);
    if (t === "-") return -primary();
    if (t === "(") {
      const v = sum();
      if (tokens[pos++] !== ")") fail("missing ')'");
      return v;
    }
    return fail(`unexpected '${t}'`);
  }

  function product(): bigint {
    let v = primary();
    for (let op = peek(); op === "*" || op === "/"; op = peek()) {
      pos++;
      const r = primary();
      if (op === "*") v *= r;
      else if (r === 0n) fail("division by zero");
      else v /= r; // BigInt division truncates toward zero, as bc does
    }
    return v;
  }

  function sum(): bigint {
    let v = product();
    for (let op = peek(); op === "+" || op === "-"; op = peek()) {
      pos++;
      const r = product();
      v = op === "+" ? v + r : v - r;
    }
    return v;
  }

  const v = sum();
  if (pos !== tokens.length) fail(`unexpected '${tokens[pos]}'`);
  return v;
}
