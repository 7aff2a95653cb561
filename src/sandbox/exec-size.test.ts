import { describe, expect, it } from "vitest";
import { execSizeProblem, MAX_EXEC_ENTRIES, MAX_EXEC_STRING_BYTES, MAX_EXEC_TOTAL_BYTES } from "./exec-size.js";

describe("execSizeProblem", () => {
  it("accepts what the kernel and bwrap accept, up to each limit", () => {
    expect(execSizeProblem(["sh", "-c", "true"], { A: "1" })).toBeUndefined();
    expect(execSizeProblem(["x".repeat(MAX_EXEC_STRING_BYTES)])).toBeUndefined();
    expect(execSizeProblem(Array<string>(MAX_EXEC_ENTRIES).fill(""))).toBeUndefined();
    // 7 strings of 131071 bytes (+ NUL + pointer) fit in 1 MiB; the eighth does not.
    const s = "y".repeat(MAX_EXEC_STRING_BYTES);
    expect(execSizeProblem(Array<string>(7).fill(s))).toBeUndefined();
    expect(execSizeProblem(Array<string>(8).fill(s))).toMatch(`take ${8 * (MAX_EXEC_STRING_BYTES + 9)} bytes, over the sandbox's limit of ${MAX_EXEC_TOTAL_BYTES} bytes (ARG_MAX)`);
  });

  it("names the string, the count or the total that is over, counting UTF-8 bytes and NAME=value", () => {
    expect(execSizeProblem(["echo", "x".repeat(MAX_EXEC_STRING_BYTES + 1)])).toBe(
      `exec: argv[1] is ${MAX_EXEC_STRING_BYTES + 1} bytes, over the sandbox's limit of ${MAX_EXEC_STRING_BYTES} bytes for one argument or variable (MAX_ARG_STRLEN)`,
    );
    // "é" is two bytes in UTF-8; "LONG=" takes five.
    expect(execSizeProblem(["é".repeat(70_000)])).toMatch(/argv\[0\] is 140000 bytes/);
    expect(execSizeProblem(["true"], { LONG: "v".repeat(MAX_EXEC_STRING_BYTES - 5) })).toBeUndefined();
    expect(execSizeProblem(["true"], { LONG: "v".repeat(MAX_EXEC_STRING_BYTES - 4) })).toMatch(/^exec: env LONG is 131072 bytes/);
    expect(execSizeProblem(["true"], Object.fromEntries(Array.from({ length: MAX_EXEC_ENTRIES }, (_, i) => [`V${i}`, ""])))).toBe(
      `exec: argv and environment have ${MAX_EXEC_ENTRIES + 1} entries, over the sandbox's limit of ${MAX_EXEC_ENTRIES} (argument count)`,
    );
  });
});
