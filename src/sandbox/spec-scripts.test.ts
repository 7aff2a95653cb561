// The shell snippets the docker and k8s providers send into their containers, run for real in a
// bwrap sandbox (same /bin/sh, same /proc layout): pid recording, process-tree kill, exec prelude.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBwrapProvider, type BwrapProvider } from "./bwrap.js";
import { countersSpec, execSpec, killSpec } from "./docker-spec.js";
import { execCommand, killCommand, writeCommand } from "./k8s-spec.js";

let root: string;
let provider: BwrapProvider;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "arbor-scripts-test-"));
  chmodSync(root, 0o755);
  provider = createBwrapProvider({ root, limits: { cpuSeconds: 5, memoryMb: 256, wallMs: 20_000 }, workspaceMb: 16 });
});
afterAll(async () => {
  await provider.destroyAll();
  rmSync(root, { recursive: true, force: true });
});

describe("provider shell snippets, run for real", () => {
  it("docker: the exec wrapper records the pid and the kill spec ends the whole tree", async () => {
    const sb = await provider.create("scripts-docker");
    const marker = `arbor-scripts-${process.pid}-tree`;
    const cmd = execSpec(7, ["sh", "-c", `sh -c 'sleep 300; : ${marker}' & sh -c 'sleep 300; : ${marker}'; wait`], "/workspace", undefined).Cmd as string[];
    // Same sandbox, two bwrap execs would not share /tmp: run target and killer in one exec.
    // Live `sleep`s (state S); a killed one can linger as a zombie (Z) until pid 1 reaps it.
    const sleeps = "$(cat /proc/[0-9]*/stat 2>/dev/null | cut -d' ' -f2,3 | grep -c '^(sleep) S$')";
    const r = await sb.exec([
      "sh",
      "-c",
      `"$@" & until [ -s /tmp/.arbor-exec-7.pid ] && [ "$(cat /proc/$(cat /tmp/.arbor-exec-7.pid)/task/*/children | wc -w)" -ge 2 ]; do sleep 0.05; done; sleep 0.1; echo "before ${sleeps}"; ${killSpec(7).Cmd!.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(" ")}; wait; echo "after ${sleeps}"`,
      "outer",
      ...cmd,
    ]);
    expect(r.stdout).toBe("before 2\nafter 0\n");
    const counters = await sb.exec(countersSpec().Cmd as string[]);
    expect(counters.exitCode).toBe(0);
    expect(counters.stdout).toContain("-- pids");
    await sb.destroy();
  });

  it("k8s: the exec prelude sets rlimits, cwd and a clean env; the write command creates directories", async () => {
    const sb = await provider.create("scripts-k8s");
    await sb.exec(["mkdir", "d"]);
    const cmd = execCommand(3, ["sh", "-c", 'pwd; echo "$FOO"; ulimit -t; ulimit -f; cat /tmp/.arbor-exec-3.pid >/dev/null && echo pid; env | grep -c HOSTNAME'], {
      cwd: "/workspace/d",
      env: { FOO: "bar" },
      cpuSeconds: 4,
      maxFileMb: 1,
    });
    const r = await sb.exec(cmd);
    expect(r.stdout).toBe("/workspace/d\nbar\n4\n2048\npid\n0\n");
    const w = await sb.exec(writeCommand("/workspace/x/y/z.txt"), { stdin: "payload" });
    expect(w.exitCode).toBe(0);
    expect((await sb.exec(["cat", "x/y/z.txt"])).stdout).toBe("payload");
    const kill = await sb.exec(killCommand(99));
    expect(kill.exitCode).toBe(0);
    await sb.destroy();
  });
});
