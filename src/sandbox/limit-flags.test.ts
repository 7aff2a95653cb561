import { describe, expect, it } from "vitest";
import { classifyLimit, type LimitEvidence } from "./limit-flags.js";

const ok: LimitEvidence = { signal: null, exitCode: 0, stderr: "", timedOut: false, oomKills: 0, pidsRefused: 0, diskFull: false };

describe("classifyLimit", () => {
  it("names the limit from kernel evidence, most specific first", () => {
    expect(classifyLimit(ok)).toBeUndefined();
    expect(classifyLimit({ ...ok, signal: "SIGKILL", exitCode: null, oomKills: 1 })).toBe("memory");
    expect(classifyLimit({ ...ok, timedOut: true, signal: "SIGKILL", exitCode: null, pidsRefused: 3 })).toBe("processes");
    expect(classifyLimit({ ...ok, signal: "SIGXFSZ", exitCode: null })).toBe("disk");
    expect(classifyLimit({ ...ok, exitCode: 1, diskFull: true })).toBe("disk");
    expect(classifyLimit({ ...ok, signal: "SIGXCPU", exitCode: null })).toBe("cpu");
    expect(classifyLimit({ ...ok, signal: "SIGKILL", exitCode: null, timedOut: true })).toBe("wall");
    // Memory beats everything: an OOM kill that also ran past the wall clock is still an OOM.
    expect(classifyLimit({ ...ok, signal: "SIGKILL", exitCode: null, timedOut: true, oomKills: 1, pidsRefused: 1 })).toBe("memory");
  });

  it("reads the ENOMEM / fork / ENOSPC / E2BIG messages only from failed commands", () => {
    expect(classifyLimit({ ...ok, exitCode: 2, stderr: "awk: out of memory in sprintf" })).toBe("memory");
    expect(classifyLimit({ ...ok, exitCode: 0, stderr: "warning: out of memory earlier, retried" })).toBeUndefined();
    expect(classifyLimit({ ...ok, exitCode: 254, stderr: "bash: fork: retry: Resource temporarily unavailable" })).toBe("processes");
    expect(classifyLimit({ ...ok, exitCode: 1, stderr: "head: error writing 'x': No space left on device" })).toBe("disk");
    expect(classifyLimit({ ...ok, exitCode: 126, stderr: "sh: 1: exec: /bin/true: Argument list too long" })).toBe("arguments");
    expect(classifyLimit({ ...ok, exitCode: 0, stderr: "retried: Argument list too long" })).toBeUndefined();
    expect(classifyLimit({ ...ok, exitCode: 1, stderr: "some other error" })).toBeUndefined();
    expect(classifyLimit({ ...ok, exitCode: 0, diskFull: true })).toBeUndefined();
  });
});
