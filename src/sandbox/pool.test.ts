import { chmodSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { realClock } from "../core/real-clock.js";
import { createBwrapProvider, type BwrapProvider } from "./bwrap.js";
import { describeSandboxContract, markerShells, pidsWithCmdline, waitFor, workspaceProcesses } from "./sandbox.contract.js";
import { createSandboxPool, type SandboxPool } from "./pool.js";
import type { ExecResult, Sandbox, SandboxProvider } from "./sandbox.js";
import { mountsUnder } from "./workspace-mount.js";

/** An in-memory provider whose creations finish only when the test says so. */
class ScriptedProvider implements SandboxProvider {
  readonly name = "scripted";
  readonly created: string[] = [];
  readonly destroyed: string[] = [];
  private readonly waiting: { id: string; go: () => void; fail: (e: Error) => void }[] = [];

  create(programId: string): Promise<Sandbox> {
    this.created.push(programId);
    return new Promise<Sandbox>((resolve, reject) => {
      const sb: Sandbox = {
        programId,
        hostWorkspace: `/fake/${programId}`,
        exec: async (): Promise<ExecResult> => ({ exitCode: 0, signal: null, stdout: "", stderr: "", timedOut: false, durationMs: 0 }),
        writeFile: async () => {},
        destroy: async () => {
          if (!this.destroyed.includes(programId)) this.destroyed.push(programId);
        },
      };
      this.waiting.push({ id: programId, go: () => resolve(sb), fail: reject });
    });
  }

  /** Finish the oldest pending creation (or the one for `id`). */
  finish(id?: string): void {
    const i = id === undefined ? 0 : this.waiting.findIndex((w) => w.id === id);
    const [w] = this.waiting.splice(i, 1);
    if (!w) throw new Error(`no pending creation ${id ?? ""}`);
    w.go();
  }

  fail(id: string): void {
    const i = this.waiting.findIndex((w) => w.id === id);
    const [w] = this.waiting.splice(i, 1);
    w?.fail(new Error(`create ${id} failed`));
  }

  get pending(): string[] {
    return this.waiting.map((w) => w.id);
  }

  async destroyAll(): Promise<void> {}
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

let contractDir: string | undefined;
function contractRoot(): string {
  if (!contractDir) {
    contractDir = mkdtempSync(join(tmpdir(), "arbor-pool-contract-"));
    chmodSync(contractDir, 0o755);
  }
  return contractDir;
}
afterAll(() => {
  if (contractDir) rmSync(contractDir, { recursive: true, force: true });
});

describe("SandboxPool logic (scripted provider, virtual clock)", () => {
  it("prepares ahead within the warm size, queues the rest, hits, misses and records metrics", async () => {
    const p = new ScriptedProvider();
    const clock = new VirtualClock();
    const registry = new Registry();
    const setups: string[] = [];
    const pool = createSandboxPool({ provider: p, clock, warmSize: 2, registry, setup: async (sb) => void setups.push(sb.programId) });

    expect(pool.prepare(["a", "b", "c", "a"])).toEqual({ started: 2, queued: 1, skipped: 1 });
    expect(p.created).toEqual(["a", "b"]);
    expect(pool.counts()).toMatchObject({ warm: 2, ready: 0, queued: 1 });

    clock.advance(250);
    p.finish("a");
    await tick();
    expect(setups).toEqual(["a"]);
    expect(pool.counts().ready).toBe(1);

    // Ready: handed over at once; its slot starts the queued program.
    const a = await pool.acquire("a");
    expect(a.programId).toBe("a");
    expect(p.created).toEqual(["a", "b", "c"]);

    // Still in flight: the acquirer waits for that same preparation.
    const bP = pool.acquire("b");
    p.finish("b");
    expect((await bP).programId).toBe("b");

    // Never prepared: created on demand.
    const dP = pool.acquire("d");
    await tick();
    p.finish("d");
    await dP;

    expect(pool.counts().acquired).toEqual({ hit: 1, in_flight: 1, warm: 0, miss: 1 });
    const text = await registry.metrics();
    expect(text).toMatch(/arbor_sandbox_pool_acquired_total\{outcome="hit"\} 1/);
    expect(text).toMatch(/arbor_sandbox_pool_acquired_total\{outcome="miss"\} 1/);
    expect(text).toMatch(/arbor_sandbox_pool_prepare_seconds_count\{mode="ahead"\} 2/);
    expect(text).toMatch(/arbor_sandbox_pool_prepare_seconds_sum\{mode="ahead"\} 0\.5\n/);
    expect(text).toMatch(/arbor_sandbox_pool_warm 1/);
    expect(text).toMatch(/arbor_sandbox_pool_live 3/);
    await expect(pool.acquire("a")).rejects.toThrow(/already has a sandbox/);

    expect(await pool.reclaim("a")).toBe(true);
    expect(await pool.reclaim("a")).toBe(false);
    expect(p.destroyed).toEqual(["a"]);
    p.finish("c");
    await pool.close();
    expect(p.destroyed.sort()).toEqual(["a", "b", "c", "d"]);
    expect(() => pool.prepare(1)).toThrow(/closed/);
  });

  it("counts idle, queued, in use, created and destroyed over every path, the same in counts() and /metrics", async () => {
    const p = new ScriptedProvider();
    const registry = new Registry();
    let failSetup = false;
    const pool = createSandboxPool({
      provider: p,
      clock: new VirtualClock(),
      warmSize: 2,
      registry,
      setup: async () => {
        if (failSetup) throw new Error("setup failed");
      },
    });
    const gauges = async (): Promise<Record<string, number>> => {
      const text = await registry.metrics();
      const out: Record<string, number> = {};
      for (const m of text.matchAll(/^arbor_sandbox_pool_(warm|idle|queued|live|created_total|destroyed_total) (\S+)$/gm)) out[m[1] as string] = Number(m[2]);
      return out;
    };
    pool.prepare(["a", "b", "c"]);
    p.finish("a");
    await tick();
    expect(pool.counts()).toMatchObject({ warm: 2, ready: 1, queued: 1, live: 0, created: 1, destroyed: 0 });
    expect(await gauges()).toEqual({ warm: 2, idle: 1, queued: 1, live: 0, created_total: 1, destroyed_total: 0 });
    await pool.acquire("a"); // its slot starts c
    p.finish("b");
    await tick();
    expect(pool.counts()).toMatchObject({ warm: 2, ready: 1, queued: 0, live: 1, created: 2, destroyed: 0 });
    // A set-up that fails tears its sandbox down: created and destroyed both count it.
    failSetup = true;
    p.finish("c");
    await tick();
    await tick();
    expect(pool.counts()).toMatchObject({ warm: 1, ready: 1, live: 1, created: 3, destroyed: 1 });
    // Reclaiming twice destroys once.
    await pool.reclaim("a");
    await pool.reclaim("a");
    expect(pool.counts()).toMatchObject({ live: 0, destroyed: 2 });
    await pool.close();
    expect(pool.counts()).toMatchObject({ warm: 0, ready: 0, live: 0, created: 3, destroyed: 3 });
    expect(await gauges()).toEqual({ warm: 0, idle: 0, queued: 0, live: 0, created_total: 3, destroyed_total: 3 });
  });

  it("works as a SandboxProvider: create acquires, destroy reclaims, destroyAll closes", async () => {
    const p = new ScriptedProvider();
    const pool = createSandboxPool({ provider: p, clock: new VirtualClock(), warmSize: 1 });
    const asP = pool.asProvider();
    expect(asP.name).toBe("scripted+pool");
    pool.prepare(["a"]);
    p.finish("a");
    const a = await asP.create("a");
    expect(pool.counts().acquired.hit + pool.counts().acquired.in_flight).toBe(1);
    await a.destroy();
    await a.destroy();
    expect(p.destroyed).toEqual(["a"]);
    expect(pool.counts().reclaimed).toBe(1);
    const bP = asP.create("b");
    await tick();
    p.finish("b");
    await bP;
    await asP.destroyAll();
    expect(p.destroyed).toEqual(["a", "b"]);
  });

  it("bounds the queue with a clear error", () => {
    const pool = createSandboxPool({ provider: new ScriptedProvider(), clock: new VirtualClock(), warmSize: 1, maxQueued: 1 });
    expect(() => pool.prepare(["a", "b", "c"])).toThrow("sandbox pool preparation queue is full (limit 1)");
    expect(() => createSandboxPool({ provider: new ScriptedProvider(), clock: new VirtualClock(), warmSize: -1 })).toThrow(/warmSize must be/);
  });

  it("hands generic warm sandboxes to programs under their id and runs set-up then", async () => {
    const p = new ScriptedProvider();
    const warmed: string[] = [];
    const setups: string[] = [];
    const pool = createSandboxPool({
      provider: p,
      clock: new VirtualClock(),
      warmSize: 3,
      warmup: async (sb) => void warmed.push(sb.programId),
      setup: async (sb) => void setups.push(sb.programId),
    });
    expect(pool.prepare(5)).toEqual({ started: 3, queued: 0, skipped: 0 });
    p.finish();
    await tick();
    expect(warmed).toEqual(["warm-1"]);
    const sb = await pool.acquire("prog-x");
    expect(sb.programId).toBe("prog-x");
    expect(setups).toEqual(["prog-x"]);
    expect(pool.counts().acquired.warm).toBe(1);
    expect(await pool.reclaim("prog-x")).toBe(true);
    expect(p.destroyed).toEqual(["warm-1"]);
    p.finish();
    p.finish();
    await pool.close();
  });

  it("a failed preparation frees its slot and fails the acquire; the program can be reclaimed", async () => {
    const p = new ScriptedProvider();
    const logs: string[] = [];
    const pool = createSandboxPool({ provider: p, clock: new VirtualClock(), warmSize: 1, log: (l) => logs.push(l) });
    pool.prepare(["a", "b"]);
    const aP = pool.acquire("a");
    p.fail("a");
    await expect(aP).rejects.toThrow("create a failed");
    await tick();
    expect(p.pending).toEqual(["b"]);
    // Failure after nobody waited: logged, not thrown; slot freed.
    p.fail("b");
    await tick();
    expect(logs.join("\n")).toMatch(/preparing b failed/);
    expect(pool.counts().warm).toBe(0);
    await pool.close();
  });

  it("reclaim during preparation or during an on-demand acquire destroys the sandbox once created", async () => {
    const p = new ScriptedProvider();
    const pool = createSandboxPool({ provider: p, clock: new VirtualClock(), warmSize: 1 });
    pool.prepare(["a", "q"]);
    expect(await pool.reclaim("q")).toBe(true); // only queued: nothing to destroy
    const r = pool.reclaim("a");
    p.finish("a");
    expect(await r).toBe(true);
    expect(p.destroyed).toEqual(["a"]);

    const cP = pool.acquire("c");
    await tick();
    expect(await pool.reclaim("c")).toBe(true);
    p.finish("c");
    await expect(cP).rejects.toThrow(/reclaimed while its sandbox was being acquired/);
    expect(p.destroyed).toEqual(["a", "c"]);
    await pool.close();
  });

  it("the periodic leak check reclaims sandboxes of programs that are no longer live", async () => {
    const p = new ScriptedProvider();
    const clock = new VirtualClock();
    const registry = new Registry();
    const live = new Set(["a", "b"]);
    const pool = createSandboxPool({ provider: p, clock, warmSize: 0, registry, livePrograms: () => live, leakCheckMs: 1000 });
    const got = Promise.all(["a", "b"].map((id) => pool.acquire(id)));
    await tick();
    p.finish("a");
    p.finish("b");
    await got;
    live.delete("b"); // terminated, but its hook never ran
    clock.advance(1000);
    await waitFor(() => p.destroyed.length === 1);
    expect(p.destroyed).toEqual(["b"]);
    expect(pool.heldPrograms()).toEqual(["a"]);
    expect(pool.counts().leaks).toBe(1);
    expect(await registry.metrics()).toMatch(/arbor_sandbox_pool_leaks_detected_total 1/);
    clock.advance(1000);
    await tick();
    expect(pool.counts().leaks).toBe(1);
    await pool.close();
    expect(clock.pendingTimers).toBe(0);
  });
});

// The pool seen as a provider passes the same contract as the providers themselves.
describeSandboxContract("bwrap through the pool", (limits) => {
  const base = createBwrapProvider({ root: contractRoot(), limits });
  return createSandboxPool({ provider: base, clock: realClock, warmSize: 1 }).asProvider();
});

describe("SandboxPool GC on real bwrap sandboxes", () => {
  let root: string;
  let provider: BwrapProvider;
  const pools: SandboxPool[] = [];
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), "arbor-pool-test-"));
    chmodSync(root, 0o755);
    provider = createBwrapProvider({ root, limits: { cpuSeconds: 5, memoryMb: 256, wallMs: 60_000 }, workspaceMb: 16 });
  });
  afterAll(async () => {
    for (const p of pools) await p.close();
    await provider.destroyAll();
    rmSync(root, { recursive: true, force: true });
  });

  const pool = (extra: Partial<Parameters<typeof createSandboxPool>[0]> = {}): SandboxPool => {
    const p = createSandboxPool({
      provider,
      clock: realClock,
      warmSize: 2,
      setup: async (sb) => {
        await sb.writeFile("task/README", `task of ${sb.programId}\n`);
        const r = await sb.exec(["sh", "-c", "cp -r task repo && echo ready > repo/state"]);
        if (r.exitCode !== 0) throw new Error(`setup failed: ${r.stderr}`);
      },
      ...extra,
    });
    pools.push(p);
    return p;
  };

  /** Start a long-running marked process in the sandbox and wait until the host sees it. */
  async function busy(sb: Sandbox, marker: string): Promise<{ run: Promise<ExecResult>; inside: () => number[] }> {
    const inside = workspaceProcesses(sb.hostWorkspace);
    const run = sb.exec(["sh", "-c", `sh -c 'sleep 300; : ${marker}'`]);
    await waitFor(() => markerShells(marker).length === 1);
    expect(inside().length).toBeGreaterThanOrEqual(3); // bwrap's pid 1 and the two shells
    return { run, inside }; // wrapped: an async function would otherwise wait for the run itself
  }

  function expectGone(ws: string, marker: string, inside: () => number[]): void {
    expect(existsSync(ws)).toBe(false);
    expect(mountsUnder(ws)).toEqual([]);
    expect(inside()).toEqual([]);
    expect(pidsWithCmdline(marker)).toEqual([]);
  }

  it("prepared ahead with set-up done; reclaim (the termination hook) removes files and processes", async () => {
    const p = pool();
    p.prepare(["g-a"]);
    await waitFor(() => p.counts().ready === 1);
    const sb = await p.acquire("g-a");
    expect((await sb.exec(["cat", "repo/state", "repo/README"])).stdout).toBe("ready\ntask of g-a\n");
    const marker = `arbor-pool-${process.pid}-hook`;
    const { run, inside } = await busy(sb, marker);
    expect(await p.reclaim("g-a")).toBe(true);
    expect((await run).signal).toBe("SIGKILL");
    expectGone(sb.hostWorkspace, marker, inside);
    expect(await p.reclaim("g-a")).toBe(false);
  });

  it("reclaims a prepared sandbox whose program never started, and one still being prepared", async () => {
    const p = pool();
    p.prepare(["g-b", "g-c"]);
    await waitFor(() => p.counts().ready >= 1);
    const before = provider.liveCount;
    expect(before).toBeGreaterThanOrEqual(1);
    await Promise.all([p.reclaim("g-b"), p.reclaim("g-c")]);
    expect(p.counts()).toMatchObject({ warm: 0, live: 0 });
    expect(provider.liveCount).toBe(0);
    expect(mountsUnder(root)).toEqual([]);
  });

  it("a failed set-up leaves nothing behind and fails the acquire", async () => {
    const p = pool({ setup: async (sb) => {
      await sb.writeFile("junk", "x");
      throw new Error("env set-up exploded");
    } });
    p.prepare(["g-d"]);
    await expect(p.acquire("g-d")).rejects.toThrow("env set-up exploded");
    expect(provider.liveCount).toBe(0);
    expect(mountsUnder(root)).toEqual([]);
  });

  it("the leak check reclaims a terminated program's sandbox with its processes", async () => {
    const live = new Set(["g-e"]);
    const p = pool({ livePrograms: () => live, leakCheckMs: 50 });
    const sb = await p.acquire("g-e");
    const marker = `arbor-pool-${process.pid}-leak`;
    const { run, inside } = await busy(sb, marker);
    live.clear();
    expect((await run).signal).toBe("SIGKILL");
    await waitFor(() => !existsSync(sb.hostWorkspace));
    expect(p.counts().leaks).toBe(1);
    expectGone(sb.hostWorkspace, marker, inside);
  });

  it("close destroys acquired and prepared sandboxes alike", async () => {
    const p = pool();
    const sb = await p.acquire("g-f");
    const marker = `arbor-pool-${process.pid}-close`;
    const { run, inside } = await busy(sb, marker);
    p.prepare(["g-g", "g-h"]);
    await p.close();
    expect((await run).signal).toBe("SIGKILL");
    expectGone(sb.hostWorkspace, marker, inside);
    expect(provider.liveCount).toBe(0);
    expect(mountsUnder(root)).toEqual([]);
  });
});
