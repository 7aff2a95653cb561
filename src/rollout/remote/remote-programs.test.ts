// Programs run on workers over a work queue and an event bus (in process here; JetStream in cli/cluster-run.test.ts),
// against the real engine HTTP surface (scripted), gateway, SQLite store and bwrap sandboxes: programs run once and
// are reported once; a delivery that keeps failing is dead-lettered and ended by the orchestrator; a program a dead
// worker left active is ended, not run again; the programs of a cut run end as aborted, and so do those a killed
// orchestrator left queued once its run is resumed.
import { chmodSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBuiltinBackend } from "../../backends/builtin.js";
import { MemoryEventBus } from "../../broker/memory-event-bus.js";
import { MemoryWorkQueue } from "../../broker/memory-work-queue.js";
import { VirtualClock } from "../../core/clock.js";
import { realClock } from "../../core/real-clock.js";
import type { Group } from "../../core/types.js";
import { startEngineServer, type ListeningEngineServer } from "../../engine/server.js";
import { createCalcEnvironment } from "../../envs/calc/calc.js";
import { JUDGEMENT_EVENT_TOOL } from "../../envs/judge-program.js";
import { createGateway, type Gateway } from "../../gateway/server.js";
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../../model/markup.js";
import { createBwrapProvider } from "../../sandbox/bwrap.js";
import type { SandboxProvider } from "../../sandbox/sandbox.js";
import { SqliteTrajectoryStore } from "../../store/sqlite-store.js";
import { ScriptedExecutor } from "../../testing/scripted-executor.js";
import type { ProgramWork, RolloutEvents } from "./program-work.js";
import { ProgramWorker, type WorkerRunContext } from "./program-worker.js";
import { RemotePrograms } from "./remote-programs.js";

const ADMIN_TOKEN = "remote-programs-admin-token-0123";

/** Answers like the golden trajectory: a calc tool call first, then `Answer: <tool output>`. */
function golden(prompt: string): string {
  const tool = /<\|tool\|>([^<]*)<\|end\|><\|assistant\|>$/.exec(prompt);
  const question = [...prompt.matchAll(/What is ([^?]+)\?/g)].pop();
  return tool ? `Answer: ${tool[1]}` : `${TOOL_CALL_OPEN}calc ${question?.[1] ?? "1+1"}${TOOL_CALL_CLOSE}`;
}

const dir = mkdtempSync(join(tmpdir(), "arbor-remote-"));
// Sandboxes run as uid 65534 when we are root: their root must be reachable by it.
chmodSync(dir, 0o755);
const env = createCalcEnvironment();
let engine: ListeningEngineServer;
let gateway: Gateway;
let store: SqliteTrajectoryStore;
let sandboxes: SandboxProvider;
let ctx: WorkerRunContext;
const closing: (() => Promise<void>)[] = [];

beforeAll(async () => {
  engine = await startEngineServer({ name: "golden", modelPath: "", policyVersion: 1, sequences: 4, contextSize: 4096, maxWaiting: 16, executor: new ScriptedExecutor(golden, { sequences: 4 }) });
  store = new SqliteTrajectoryStore(join(dir, "store.sqlite"));
  gateway = createGateway({ backends: [createBuiltinBackend({ name: "golden", url: `${engine.url}/v1` })], store, auth: { adminToken: ADMIN_TOKEN, requireProgramKeys: true } });
  const gatewayUrl = await gateway.listen("127.0.0.1", 0);
  sandboxes = createBwrapProvider({ root: join(dir, "sandboxes"), limits: { cpuSeconds: 2, memoryMb: 128, wallMs: 5000 } });
  ctx = { env, store, sandboxes, gatewayUrl, gatewayAdminToken: ADMIN_TOKEN, model: "arbor-tiny", limits: { maxTurns: 3, maxTokensPerCall: 64, maxTotalTokens: 256 }, temperature: 1, seed: 1, clock: realClock };
});

afterAll(async () => {
  for (const c of closing.reverse()) await c();
  await sandboxes?.destroyAll();
  await gateway?.close();
  await engine?.close();
  await store?.close();
});

/** A queue, a bus, the orchestrator's runner and `workers` workers with their context factories. */
async function deployment(name: string, contexts: (() => Promise<WorkerRunContext>)[], o: { ackWaitMs?: number; maxDeliver?: number; cancelGraceMs?: number } = {}) {
  const queue = MemoryWorkQueue.create<ProgramWork>(name, { ackWaitMs: o.ackWaitMs ?? 5000, maxDeliver: o.maxDeliver ?? 3, duplicateWindowMs: 60_000 }, realClock);
  const bus = new MemoryEventBus<RolloutEvents>(name);
  const logs: string[] = [];
  const remote = await RemotePrograms.start({ queue, bus, config: "{}", clock: realClock, pollMs: 50, cancelGraceMs: o.cancelGraceMs ?? 10_000, log: (l) => logs.push(l) });
  const workers = await Promise.all(
    contexts.map((contextOf, i) => ProgramWorker.start({ name: `w${i}`, queue: queue.connect(), bus, contextOf, concurrency: 2, heartbeatMs: 100, clock: realClock, log: (l) => logs.push(l) })),
  );
  closing.push(async () => {
    for (const w of workers) await w.close(1000);
    await remote.close();
    await queue.close();
  });
  return { queue, bus, remote, workers, logs };
}

/** A run with one group of `n` programs of the first calc task. */
async function group(runId: string, n: number): Promise<{ group: Group; o: Omit<WorkerRunContext, "sandboxes"> & { runId: string } }> {
  await store.createRun({ id: runId, name: runId, configJson: "{}", startedAt: realClock.now() });
  const task = env.tasks(1, 5)[0]!;
  const g: Group = { id: `${runId}/g0`, runId, taskId: task.id, programIds: Array.from({ length: n }, (_, i) => `${runId}/g0/s${i}`) };
  await store.createGroup(g);
  const { sandboxes: _s, ...rest } = ctx;
  return { group: g, o: { ...rest, runId } };
}

describe("programs on workers (in-process queue and bus)", () => {
  it("run on two workers, each once, and resolve with their recorded ends", async () => {
    const { remote, workers } = await deployment("ok", [async () => ctx, async () => ctx]);
    const { group: g, o } = await group("ok", 4);
    const task = env.tasks(1, 5)[0]!;
    const ended = await Promise.all(g.programIds.map((id, i) => remote.run(o, task, g, id, i)));
    for (const e of ended) {
      expect(e.result.termination.kind).toBe("completed");
      expect(e.ctx.check?.score).toBe(1);
      expect(e.ctx.trajectory.calls.map((c) => c.index)).toEqual([0, 1]);
    }
    expect(workers[0]!.ended + workers[1]!.ended).toBe(4);
    expect(remote.outstanding).toBe(0);
  });

  it("a delivery failing on every worker is dead-lettered and the orchestrator ends its program with the reason", async () => {
    const broken = async (): Promise<WorkerRunContext> => {
      throw new Error("no sandbox provider here");
    };
    const { remote, logs } = await deployment("dead", [broken], { maxDeliver: 2 });
    const { group: g, o } = await group("dead", 1);
    const ended = await remote.run(o, env.tasks(1, 5)[0]!, g, g.programIds[0]!, 0);
    expect(ended.result.termination.kind).toBe("aborted");
    expect(ended.result.termination.detail).toMatch(/no worker ended it: dead-lettered after 2 deliveries \(handler failed on the last delivery \(2 of 2\): no sandbox provider here\)/);
    expect((await store.getTrajectory(g.programIds[0]!))?.program.state).toBe("terminated");
    expect(logs.some((l) => /program dead\/g0\/s0 \(delivery 1 of 2\) failed: no sandbox provider here/.test(l))).toBe(true);
  });

  it("a program left active by a worker that died is ended by the next worker, not run again", async () => {
    let entered!: () => void;
    const inSetup = new Promise<void>((r) => (entered = r));
    // The first worker's sandbox never comes: it is "killed" there, after the gateway created the program.
    const stuck: WorkerRunContext = { ...ctx, sandboxes: { ...sandboxes, create: () => (entered(), new Promise((_, reject) => setTimeout(() => reject(new Error("the worker is gone")), 2000))) } as SandboxProvider };
    const { remote, workers, queue, bus } = await deployment("lost", [async () => stuck], { ackWaitMs: 300, maxDeliver: 3 });
    const { group: g, o } = await group("lost", 1);
    const id = g.programIds[0]!;
    const result = remote.run(o, env.tasks(1, 5)[0]!, g, id, 0);
    await inSetup;
    expect((await store.getTrajectory(id))?.program.state).toBe("active");
    await workers[0]!.abandon();
    const survivor = await ProgramWorker.start({ name: "w9", queue: queue.connect(), bus, contextOf: async () => ctx, concurrency: 1, heartbeatMs: 100, clock: realClock });
    closing.push(() => survivor.close(1000));
    const ended = await result;
    expect(ended.result.termination).toEqual({ kind: "aborted", detail: "its worker stopped before ending it (redelivered: delivery 2 of 3); ended by worker w9" });
    expect(ended.ctx.trajectory.calls).toHaveLength(0);
  });

  it("a cut run: its programs end as aborted on the workers, with the cut's reason", async () => {
    const { remote } = await deployment("cut", [async () => ctx]);
    const { group: g, o } = await group("cut", 2);
    const cut = new AbortController();
    cut.abort(new Error("received SIGTERM"));
    const ended = await Promise.all(g.programIds.map((id, i) => remote.run({ ...o, signal: cut.signal }, env.tasks(1, 5)[0]!, g, id, i)));
    for (const e of ended) expect(e.result.termination).toEqual({ kind: "aborted", detail: "run aborted before the program started (run cut cancelled: received SIGTERM)" });
  });

  it("a cut run whose programs no worker ends within the grace: they end here as aborted, recorded, with the cut's reason", async () => {
    // No worker: the programs wait in the queue when the run is cut.
    const { remote } = await deployment("grace", [], { cancelGraceMs: 200 });
    const { group: g, o } = await group("grace", 2);
    const cut = new AbortController();
    const running = Promise.all(g.programIds.map((id, i) => remote.run({ ...o, signal: cut.signal }, env.tasks(1, 5)[0]!, g, id, i)));
    cut.abort(new Error("received SIGINT"));
    const ended = await running;
    const detail = "run cut (received SIGINT); no worker ended it in time";
    for (const e of ended) expect(e.result.termination).toEqual({ kind: "aborted", detail });
    for (const id of g.programIds) expect((await store.getTrajectory(id))?.program).toMatchObject({ state: "terminated", termination: { kind: "aborted", detail } });
  });

  it("a program published after its run's cut and grace (the rollout ends its unstarted ones so) gets a grace too", async () => {
    const { remote } = await deployment("late", [], { cancelGraceMs: 100 });
    const { group: g, o } = await group("late", 2);
    const cut = new AbortController();
    cut.abort(new Error("received SIGTERM"));
    const first = await remote.run({ ...o, signal: cut.signal }, env.tasks(1, 5)[0]!, g, g.programIds[0]!, 0);
    // The first grace has fired and ended the first program; the second is published only now.
    const late = await remote.run({ ...o, signal: cut.signal }, env.tasks(1, 5)[0]!, g, g.programIds[1]!, 1);
    const detail = "run cut (received SIGTERM); no worker ended it in time";
    expect(first.result.termination).toEqual({ kind: "aborted", detail });
    expect(late.result.termination).toEqual({ kind: "aborted", detail });
    expect((await store.getTrajectory(g.programIds[1]!))?.program.termination).toEqual({ kind: "aborted", detail });
  });

  it("a program a worker ended and judged, whose report was lost, is ended here with that judgement", async () => {
    const { remote } = await deployment("judged", [], { cancelGraceMs: 100 });
    const { group: g, o } = await group("judged", 1);
    const id = g.programIds[0]!;
    const cut = new AbortController();
    const pending = remote.run({ ...o, signal: cut.signal }, env.tasks(1, 5)[0]!, g, id, 0);
    // What a worker did before its report was lost: the program created, judged (recorded) and ended as completed.
    const post = (path: string, body: object) =>
      fetch(`${ctx.gatewayUrl}${path}`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_TOKEN}` }, body: JSON.stringify(body) });
    expect((await post("/programs", { id, run_id: "judged", group_id: g.id, task_id: g.taskId, sample_index: 0 })).status).toBe(201);
    const check = { score: 1, detail: "42 is right" };
    await store.recordTool({ programId: id, callIndex: 0, tool: JUDGEMENT_EVENT_TOOL, input: "", output: JSON.stringify({ finalAnswer: "42", check, zeroReward: false }), ok: true, durationMs: 0 });
    expect((await post(`/programs/${encodeURIComponent(id)}/release`, { termination: { kind: "completed" } })).status).toBe(200);
    cut.abort(new Error("received SIGTERM"));
    const ended = await pending;
    expect(ended.result.termination).toEqual({ kind: "completed" });
    expect(ended.ctx.finalAnswer).toBe("42");
    expect(ended.ctx.check).toEqual(check);
  });

  /** A worker whose queue runs on a virtual clock (its consumer's 30 s drain timeout passes at once) and one program slow to start. */
  async function slowProgramOnWorker(name: string) {
    const clock = new VirtualClock();
    const queue = MemoryWorkQueue.create<ProgramWork>(name, { ackWaitMs: 600_000, maxDeliver: 3, duplicateWindowMs: 60_000 }, clock);
    const bus = new MemoryEventBus<RolloutEvents>(name);
    const remote = await RemotePrograms.start({ queue, bus, config: "{}", clock: realClock, pollMs: 50 });
    // Its context comes when the test says: until then the program is in flight.
    let entered!: () => void;
    let proceed!: () => void;
    const inHandler = new Promise<void>((r) => (entered = r));
    const gate = new Promise<void>((r) => (proceed = r));
    const worker = await ProgramWorker.start({ name: `w-${name}`, queue: queue.connect(), bus, contextOf: async () => (entered(), await gate, ctx), concurrency: 1, heartbeatMs: 600_000, clock });
    closing.push(async () => {
      await remote.close();
      await queue.close();
    });
    const { group: g, o } = await group(name, 1);
    const ended = remote.run(o, env.tasks(1, 5)[0]!, g, g.programIds[0]!, 0);
    await inHandler;
    return { clock, worker, proceed, ended, programId: g.programIds[0]! };
  }

  it("a worker's drain longer than its queue consumer's own (30 s) lets the program run past 30 s to its end", async () => {
    const { clock, worker, proceed, ended } = await slowProgramOnWorker("drain-ends");
    const draining = worker.drain(120_000);
    clock.advance(30_000); // the consumer gives up on its handler; the worker's drain has 90 s left
    await new Promise((r) => setTimeout(r, 20));
    proceed();
    expect((await ended).result.termination.kind).toBe("completed");
    expect(await draining).toBe(0);
  });

  it("a worker's drain longer than its queue consumer's own (30 s) aborts the programs left at its own end; each ends recorded", async () => {
    const { clock, worker, proceed, ended, programId } = await slowProgramOnWorker("drain-cut");
    const draining = worker.drain(45_000);
    clock.advance(30_000); // the consumer gives up on its handler
    await new Promise((r) => setTimeout(r, 20));
    clock.advance(15_000); // the worker's drain runs out: the program is aborted
    proceed();
    expect(await draining).toBe(1);
    const { result } = await ended;
    expect(result.termination).toEqual({ kind: "aborted", detail: "run aborted before the program started (worker w-drain-cut is stopping (drain ran out after 45000 ms))" });
    expect((await store.getTrajectory(programId))?.program.termination).toEqual(result.termination);
  });

  it("a resumed run cuts the work its killed orchestrator left queued: it ends unrun as aborted, the new work runs", async () => {
    // No worker yet: the killed process's program waits in the queue.
    const { queue, bus, remote: killed, logs } = await deployment("left", []);
    const { group: g, o } = await group("left", 2);
    const task = env.tasks(1, 5)[0]!;
    const stale = killed.run(o, task, g, g.programIds[0]!, 0);
    const resumed = await RemotePrograms.start({ queue, bus, config: "{}", clock: realClock, pollMs: 50 });
    closing.push(() => resumed.close());
    await resumed.cutEarlier("left", killed.session, "the run was resumed by another orchestrator process");
    const worker = await ProgramWorker.start({ name: "w5", queue: queue.connect(), bus, contextOf: async () => ctx, concurrency: 2, heartbeatMs: 100, clock: realClock, log: (l) => logs.push(l) });
    closing.push(() => worker.close(1000));
    const fresh = await resumed.run({ ...o, signal: new AbortController().signal }, task, g, g.programIds[1]!, 1);
    expect(fresh.result.termination.kind).toBe("completed");
    expect((await stale).result.termination).toEqual({ kind: "aborted", detail: "run aborted before the program started (run left cancelled: the run was resumed by another orchestrator process)" });
    expect((await store.getTrajectory(g.programIds[0]!))?.calls).toHaveLength(0);
  });

  it("a run resumed by another orchestrator process (same run id) is not cut by the earlier one's cut", async () => {
    const { queue, bus, remote } = await deployment("resumed", [async () => ctx]);
    const { group: g, o } = await group("resumed", 1);
    const cut = new AbortController();
    cut.abort(new Error("received SIGINT"));
    const [first] = await Promise.all(g.programIds.map((id, i) => remote.run({ ...o, signal: cut.signal }, env.tasks(1, 5)[0]!, g, id, i)));
    expect(first?.result.termination.kind).toBe("aborted");
    // The resumed process: the same run id and bus (the cut stays on it, replayed to workers that start later).
    const again = await RemotePrograms.start({ queue, bus, config: "{}", clock: realClock, pollMs: 50 });
    closing.push(() => again.close());
    const g1: Group = { ...g, id: "resumed/g1", programIds: ["resumed/g1/s0"] };
    await store.createGroup(g1);
    const ended = await again.run({ ...o, signal: new AbortController().signal }, env.tasks(1, 5)[0]!, g1, "resumed/g1/s0", 0);
    expect(ended.result.termination.kind).toBe("completed");
  });
});
