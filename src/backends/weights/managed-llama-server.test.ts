// The llama-server process manager against a stand-in llama-server program (a real process serving real
// HTTP, testing/fake-llama-server-main.ts): start, restart on the same port, failed starts with the
// process's log in the error, SIGTERM then SIGKILL, and no process left behind.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ArborError } from "../../core/errors.js";
import { fakeLlamaServerCommand, writeFakeGguf } from "../../testing/fake-llama-server.js";
import { ManagedLlamaServer, type ManagedLlamaServerOptions } from "./managed-llama-server.js";

/** Whether a process with this id exists (signal 0 only checks). */
function alive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function modelPath(url: string): Promise<unknown> {
  return ((await (await fetch(`${url}/props`)).json()) as { model_path?: unknown }).model_path;
}

describe("ManagedLlamaServer (stand-in llama-server process)", () => {
  const dirs: string[] = [];
  const servers: ManagedLlamaServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const setup = () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-managed-llama-"));
    dirs.push(dir);
    return { dir, a: writeFakeGguf(join(dir, "a.gguf"), "weights-a"), b: writeFakeGguf(join(dir, "b.gguf"), "weights-b") };
  };
  const start = async (opts: Omit<ManagedLlamaServerOptions, "binary">) => {
    const s = await ManagedLlamaServer.start({ ...fakeLlamaServerCommand(), ...opts });
    servers.push(s);
    return s;
  };

  it("restarts on another GGUF on the same port, and close leaves no process", async () => {
    const { dir, a, b } = setup();
    const s = await start({ name: "e1", modelPath: a, slotSaveDir: dir, extraArgs: ["--parallel", "2"] });
    const url = s.url;
    const first = s.pid;
    expect(alive(first)).toBe(true);
    expect(await modelPath(url)).toBe(a);
    expect(s.args).toEqual(["-m", a, "--host", "127.0.0.1", "--port", "0", "--slot-save-path", dir, "--parallel", "2"]);

    await s.restart(b);
    expect(s.url).toBe(url);
    expect(s.args).toContain(String(s.port));
    expect(s.modelPath).toBe(b);
    expect(await modelPath(url)).toBe(b);
    expect(alive(first)).toBe(false);
    const second = s.pid;
    expect(second).not.toBe(first);

    await s.close();
    expect(alive(second)).toBe(false);
    expect(s.running).toBe(false);
    await s.close();
    await expect(s.startOn(a)).rejects.toThrow(/is closed/);
  });

  it("fails a start on a GGUF that does not load with the process's last log lines, leaving no process", async () => {
    const { dir, a } = setup();
    const bad = writeFakeGguf(join(dir, "bad.gguf"), "FAIL");
    const err = await ManagedLlamaServer.start({ ...fakeLlamaServerCommand(), name: "e2", modelPath: bad, slotSaveDir: dir }).catch((e) => e);
    expect(err).toBeInstanceOf(ArborError);
    expect(err.code).toBe("llama_server");
    expect(err.message).toContain(`llama-server 'e2'`);
    expect(err.message).toContain(`on ${bad} exited (code 1)`);
    expect(err.message).toContain("failed to load model");

    // A restart onto it: the old process is gone, the new one too, and the port stays reserved for the next start.
    const s = await start({ name: "e2", modelPath: a, slotSaveDir: dir });
    const old = s.pid;
    await expect(s.restart(bad)).rejects.toThrow(/exiting due to model loading error/);
    expect(s.running).toBe(false);
    expect(alive(old)).toBe(false);
    expect(alive(s.pid)).toBe(false);
    const port = s.port;
    await s.startOn(a);
    expect(s.port).toBe(port);
    expect(await modelPath(s.url)).toBe(a);
  });

  it("quotes a failed process's last line even after much output and without a final newline", async () => {
    const { dir, a } = setup();
    // 300 KB of output (well past a pipe's buffer), then the reason, unterminated, then exit: the reason
    // arrives after the exit is reported, and is still in the message.
    const script = `head -c 300000 /dev/zero | tr '\\0' x; echo; printf 'main: failed to load model'; exit 3`;
    const err = await ManagedLlamaServer.start({ binary: "/bin/sh", binaryArgs: ["-c", script, "sh"], name: "e7", modelPath: a, slotSaveDir: dir }).catch((e) => e);
    expect(err).toBeInstanceOf(ArborError);
    expect(err.message).toContain("exited (code 3)");
    expect(err.message).toMatch(/main: failed to load model$/);
    expect(err.message).toMatch(/x… \(\d+ chars\)/);
    expect(err.message.length).toBeLessThan(50_000);
  });

  it("stops a process that is not healthy in time", async () => {
    const { dir, a } = setup();
    // Node with tsx needs far longer than 1 ms to start the stand-in.
    const err = await ManagedLlamaServer.start({ ...fakeLlamaServerCommand(), name: "e3", modelPath: a, slotSaveDir: dir, startTimeoutMs: 1 }).catch((e) => e);
    expect(err).toBeInstanceOf(ArborError);
    expect(err.message).toMatch(/had no answer "200 OK" to GET \/health within 1 ms/);
  });

  it("sends SIGKILL when SIGTERM is ignored", async () => {
    const { dir, a } = setup();
    const s = await start({ name: "e4", modelPath: a, slotSaveDir: dir, env: { ...process.env, FAKE_LLAMA_IGNORE_SIGTERM: "1" }, stopTimeoutMs: 200 });
    const pid = s.pid;
    await s.stop();
    expect(alive(pid)).toBe(false);
    expect(s.logTail()).toContain("ignoring SIGTERM");
  });

  it("says when its port was taken while it was stopped", async () => {
    const { dir, a } = setup();
    const s = await start({ name: "e5", modelPath: a, slotSaveDir: dir });
    await s.stop();
    const squatter: Server = createServer();
    await new Promise<void>((r) => squatter.listen(s.port, "127.0.0.1", r));
    try {
      const err = await s.startOn(a).catch((e) => e);
      expect(err).toBeInstanceOf(ArborError);
      expect(err.message).toMatch(/exited \(code 1\)/);
      expect(err.message).toContain("EADDRINUSE");
      expect(s.running).toBe(false);
    } finally {
      await new Promise((r) => squatter.close(r));
    }
  });

  it("refuses extra arguments that would fight its own", async () => {
    const { dir, a } = setup();
    const err = await ManagedLlamaServer.start({ ...fakeLlamaServerCommand(), name: "e6", modelPath: a, slotSaveDir: dir, extraArgs: ["--parallel", "2", "--port=9999"] }).catch((e) => e);
    expect(err).toBeInstanceOf(ArborError);
    expect(err.code).toBe("config");
    expect(err.message).toBe("llama-server 'e6' extraArgs: --port=9999 is set by Arbor (modelPath, port, slotSaveDir)");
  });

  it("names a binary that cannot be started", async () => {
    const { dir, a } = setup();
    const err = await ManagedLlamaServer.start({ binary: join(dir, "no-such-llama-server"), modelPath: a, slotSaveDir: dir }).catch((e) => e);
    expect(err).toBeInstanceOf(ArborError);
    expect(err.message).toMatch(/could not be started: spawn .*no-such-llama-server ENOENT/);
  });
});
