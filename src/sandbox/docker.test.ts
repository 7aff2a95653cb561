// The docker provider: the shared contract suite against a real engine (skipped, with the reason,
// where none answers), and the request mapping against a fake at the dockerode boundary.
import { EventEmitter } from "node:events";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ContainerCreateOptions, ExecCreateOptions } from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { EXEC_KILL_GRACE_MS } from "./docker-k8s-shared.js";
import { describeSandboxContract, waitFor } from "./sandbox.contract.js";
import { createDockerProvider, dockerAvailable, type DockerClientLike, type DockerContainerLike, type DockerExecLike } from "./docker.js";
import { parseCounters } from "./docker-spec.js";
import type { SandboxLimits } from "./sandbox.js";
import { mountsUnder } from "./workspace-mount.js";

const docker = await dockerAvailable();
let root: string;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "arbor-docker-test-"));
  chmodSync(root, 0o755);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describeSandboxContract("docker", (limits) => createDockerProvider({ root, limits }), { skipReason: docker.ok ? undefined : docker.message });

interface Reply {
  stdout?: string;
  stderr?: string;
  exitCode: number;
  /** Never ends on its own: only a kill exec (or removal) ends it, with exit 137. */
  hang?: boolean;
  /** With hang: the kill ends the command (exit 137) but not its stream, which a process it missed holds open. */
  orphan?: boolean;
}

/** A fake engine: records every request, answers execs with `handler`. */
class FakeDocker implements DockerClientLike {
  readonly containers: FakeContainer[] = [];
  failCreate = false;
  handler: (cmd: string[], stdin: string) => Reply = () => ({ exitCode: 0 });
  readonly modem = {
    demuxStream: (stream: NodeJS.ReadableStream, stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream) => {
      Object.assign(stream, { out: stdout, err: stderr });
    },
  };

  async createContainer(spec: ContainerCreateOptions): Promise<DockerContainerLike> {
    if (this.failCreate) throw new Error("No such image: nope:latest");
    const c = new FakeContainer(this, spec);
    this.containers.push(c);
    return c;
  }

  async ping(): Promise<unknown> {
    return "OK";
  }
}

class FakeStream extends EventEmitter {
  out?: NodeJS.WritableStream;
  err?: NodeJS.WritableStream;
  stdin = "";
  finish(r: Reply): void {
    if (r.stdout) this.out?.write(Buffer.from(r.stdout));
    if (r.stderr) this.err?.write(Buffer.from(r.stderr));
    this.emit("end");
  }
}

class FakeContainer implements DockerContainerLike {
  readonly id = "c0ffee";
  started = 0;
  removed: { force: boolean; v: boolean }[] = [];
  readonly execs: { spec: ExecCreateOptions; stdin: string; exit: number | null; stream?: FakeStream; orphan?: boolean }[] = [];

  constructor(
    private readonly engine: FakeDocker,
    readonly spec: ContainerCreateOptions,
  ) {}

  async start(): Promise<unknown> {
    this.started++;
    return undefined;
  }

  async exec(spec: ExecCreateOptions): Promise<DockerExecLike> {
    const rec: (typeof this.execs)[number] = { spec, stdin: "", exit: null };
    this.execs.push(rec);
    const cmd = spec.Cmd as string[];
    return {
      start: async (opts: { hijack: boolean; stdin: boolean }) => {
        const s = new FakeStream();
        rec.stream = s;
        const end = (data?: string): void => {
          rec.stdin = data ?? "";
          setImmediate(() => {
            // A kill exec ends the hung exec whose id it names.
            if (cmd[2]?.includes("children")) {
              const victim = this.execs.find((e) => (e.spec.Cmd as string[])[3] === cmd[3] && e.exit === null && e !== rec);
              if (victim) {
                victim.exit = 137;
                if (!victim.orphan) victim.stream?.finish({ exitCode: 137 });
              }
            }
            const r = this.engine.handler(cmd, rec.stdin);
            if (r.orphan) rec.orphan = true;
            if (r.hang) return;
            rec.exit = r.exitCode;
            s.finish(r);
          });
        };
        // Without stdin attached the command starts at once; with it, when stdin is closed.
        if (!opts.stdin) end();
        return Object.assign(s, { end }) as unknown as NodeJS.ReadWriteStream;
      },
      inspect: async () => ({ ExitCode: rec.exit, Running: rec.exit === null }),
    };
  }

  async remove(opts: { force: boolean; v: boolean }): Promise<unknown> {
    this.removed.push(opts);
    for (const e of this.execs) if (e.exit === null) e.stream?.emit("close");
    if (this.removed.length > 1) throw Object.assign(new Error("no such container"), { statusCode: 404 });
    return undefined;
  }
}

const LIMITS: SandboxLimits = { cpuSeconds: 3, memoryMb: 128, wallMs: 1000 };

describe("docker provider request mapping (fake engine)", () => {
  const setup = () => {
    const engine = new FakeDocker();
    const clock = new VirtualClock();
    const p = createDockerProvider({ root, limits: LIMITS, client: engine, clock, image: "arbor/sandbox:1", maxProcesses: 32, maxFileMb: 8, tmpSizeMb: 16, cpus: 0.5 });
    return { engine, clock, p };
  };

  it("creates one locked-down container per program with the workspace bound", async () => {
    const { engine, p } = setup();
    const sb = await p.create("prog/1");
    const c = engine.containers[0]!;
    expect(c.started).toBe(1);
    expect(c.spec).toMatchObject({
      Image: "arbor/sandbox:1",
      User: "65534:65534",
      WorkingDir: "/workspace",
      NetworkDisabled: true,
      Labels: { "arbor.sandbox": "1", "arbor.program": "prog/1", "arbor.owner": String(process.pid) },
      HostConfig: {
        NetworkMode: "none",
        ReadonlyRootfs: true,
        Binds: [`${sb.hostWorkspace}:/workspace:rw`],
        Tmpfs: { "/tmp": "rw,nosuid,nodev,size=16m" },
        Memory: 128 * 1024 * 1024,
        MemorySwap: 128 * 1024 * 1024,
        NanoCpus: 5e8,
        PidsLimit: 32,
        CapDrop: ["ALL"],
        SecurityOpt: ["no-new-privileges"],
        Ulimits: [
          { Name: "cpu", Soft: 3, Hard: 4 },
          { Name: "fsize", Soft: 8 * 1024 * 1024, Hard: 8 * 1024 * 1024 },
        ],
        Init: true,
      },
    });
    expect(existsSync(sb.hostWorkspace)).toBe(true);
    // Where the host allows mounts (root), the bound workspace is a size-limited tmpfs.
    if (process.getuid?.() === 0) expect(mountsUnder(sb.hostWorkspace)).toEqual([sb.hostWorkspace]);
    await sb.writeFile("in/a.txt", "data");
    expect(readFileSync(join(sb.hostWorkspace, "in/a.txt"), "utf8")).toBe("data");
    await p.destroyAll();
  });

  it("maps exec to a docker exec: argv, cwd, env, stdin, demuxed output, exit status", async () => {
    const { engine, p } = setup();
    engine.handler = (cmd, stdin) => (cmd.at(-1) === "boom" ? { exitCode: 139 } : { stdout: `got ${stdin}`, stderr: "warn\n", exitCode: 3 });
    const sb = await p.create("prog-exec");
    const r = await sb.exec(["cat", "-"], { stdin: "hello", cwd: "sub", env: { FOO: "bar" } });
    expect(r).toMatchObject({ exitCode: 3, signal: null, stdout: "got hello", stderr: "warn\n", timedOut: false });
    const e = engine.containers[0]!.execs[0]!;
    expect(e.spec).toMatchObject({ AttachStdin: true, Tty: false, WorkingDir: "/workspace/sub" });
    expect((e.spec.Cmd as string[]).slice(3)).toEqual(["1", "cat", "-"]);
    expect(e.spec.Env).toContain("FOO=bar");
    expect(e.stdin).toBe("hello");
    expect(await sb.exec(["boom"])).toMatchObject({ exitCode: null, signal: "SIGSEGV" });
    await expect(sb.exec(["x"], { env: { "A=B": "1" } })).rejects.toThrow(/env name 'A=B'/);
    // Too big to start anywhere: refused before the engine sees it, naming the limit.
    const execs = engine.containers[0]!.execs.length;
    const big = await sb.exec(["echo", "a".repeat(3_000_000)]);
    expect(big).toMatchObject({ exitCode: 126, limit: "arguments", stderr: expect.stringMatching(/argv\[1\] is 3000000 bytes, over/) });
    expect(engine.containers[0]!.execs.length).toBe(execs);
    await p.destroyAll();
  });

  it("kills the exec's process tree at the wall-clock limit", async () => {
    const { engine, clock, p } = setup();
    engine.handler = (cmd) => (cmd.at(-1) === "300" ? { exitCode: 0, hang: true } : { exitCode: 0 });
    const sb = await p.create("prog-wall");
    const run = sb.exec(["sleep", "300"]);
    // The wall timer starts once the exec is attached: wait for the engine to see it.
    await waitFor(() => engine.containers[0]!.execs[0]?.stream !== undefined);
    await new Promise((r) => setImmediate(r));
    clock.advance(1000);
    const r = await run;
    expect(r).toMatchObject({ timedOut: true, signal: "SIGKILL", exitCode: null, limit: "wall" });
    const kill = engine.containers[0]!.execs.find((e) => (e.spec.Cmd as string[])[2]?.includes("kill -KILL"));
    expect((kill?.spec.Cmd as string[])[3]).toBe("1");
    await p.destroyAll();
  });

  it("ends an exec killed at its wall-clock limit after a grace period, even while a process the kill missed holds its stream open", async () => {
    const { engine, clock, p } = setup();
    engine.handler = (cmd) => (cmd.at(-1) === "300" ? { exitCode: 0, hang: true, orphan: true } : { exitCode: 0 });
    const sb = await p.create("prog-orphan");
    const run = sb.exec(["sleep", "300"]);
    await waitFor(() => engine.containers[0]!.execs[0]?.stream !== undefined);
    await new Promise((r) => setImmediate(r));
    let settled = false;
    void run.then(() => (settled = true));
    clock.advance(1000);
    await waitFor(() => engine.containers[0]!.execs.some((e) => (e.spec.Cmd as string[])[2]?.includes("kill -KILL")));
    await new Promise((r) => setImmediate(r));
    // Killed, but the stream is still open: the exec waits out the grace period.
    expect(settled).toBe(false);
    clock.advance(EXEC_KILL_GRACE_MS);
    expect(await run).toMatchObject({ timedOut: true, signal: "SIGKILL", exitCode: null, limit: "wall" });
    await p.destroyAll();
  });

  it("reads the container's cgroup counters after a failure to flag OOM kills and refused forks", async () => {
    const { engine, p } = setup();
    let oom = 0;
    engine.handler = (cmd) => {
      if (cmd[2]?.includes("memory.events")) return { stdout: `oom 1\nmax 9\noom_kill ${oom}\n-- pids\nmax 0\n`, exitCode: 0 };
      if (cmd.at(-1) === "eat") {
        oom++;
        return { exitCode: 137 };
      }
      return { exitCode: 1 };
    };
    const sb = await p.create("prog-oom");
    expect((await sb.exec(["eat"])).limit).toBe("memory");
    expect((await sb.exec(["false"])).limit).toBeUndefined();
    expect(parseCounters("max 3\noom_kill 2\n-- pids\nmax 5\n")).toEqual({ oomKills: 2, pidsRefused: 5 });
    await p.destroyAll();
  });

  it("destroy removes the container (once; a vanished one is fine), ends running execs and the workspace", async () => {
    const { engine, p } = setup();
    engine.handler = () => ({ exitCode: 0, hang: true });
    const sb = await p.create("prog-destroy");
    const run = sb.exec(["sleep", "300"]);
    await waitFor(() => engine.containers[0]!.execs[0]?.stream !== undefined);
    await Promise.all([sb.destroy(), sb.destroy()]);
    expect(engine.containers[0]!.removed).toEqual([{ force: true, v: true }]);
    expect(await run).toMatchObject({ signal: "SIGKILL" });
    expect(existsSync(sb.hostWorkspace)).toBe(false);
    expect(mountsUnder(sb.hostWorkspace)).toEqual([]);
    await expect(sb.exec(["true"])).rejects.toThrow(/is destroyed/);
    expect(p.liveCount).toBe(0);
  });

  it("a failed create leaves no workspace and says why", async () => {
    const { engine, p } = setup();
    engine.failCreate = true;
    await expect(p.create("prog-bad")).rejects.toThrow(/cannot start a container from arbor\/sandbox:1: No such image/);
    expect(p.liveCount).toBe(0);
  });
});
