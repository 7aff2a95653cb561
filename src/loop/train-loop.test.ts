// The training loop in async mode on the real stack: the orchestrated rollout on two built-in engines behind the
// gateway (token path), SQLite store, bwrap sandboxes, with a scripted executor standing in for the policy
// (programs must call tools deterministically), a scripted Trainer port that publishes the same GGUF as
// version + 1, and the real weight sync (POST /v1/load_weights on every engine).
import { chmodSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createArborBackend } from "../backends/vllm.js";
import { realClock } from "../core/real-clock.js";
import { Rng } from "../core/rng.js";
import { ScriptedExecutor, waitOrAbort } from "../testing/scripted-executor.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { createCalcEnvironment } from "../envs/calc/calc.js";
import { createGateway, type Gateway } from "../gateway/server.js";
import { createRewardFromConfig } from "../reward/registry.js";
import { createBwrapProvider } from "../sandbox/bwrap.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { OrchestratedRollout, type OrchestratedRolloutOptions, type RolloutEnd, type TakenBatch } from "../rollout/async-rollout.js";
import { callVersionSpans } from "../rollout/async-rollout-versions.js";
import { jsonlBatchExporter } from "./export-batch.js";
import { runTrainLoop, type RolloutSource } from "./train-loop.js";
import type { Trainer } from "./trainer-port.js";
import { loadWeightsEverywhere, type InFlightOnSwitch } from "./weight-sync.js";

const ADMIN_TOKEN = "test-admin-token-0123456789";

/** A calc tool call first, then `Answer: <tool output>` (the golden trajectory). */
const golden = (prompt: string): string => {
  const tool = /<\|tool\|>([^<]*)<\|end\|><\|assistant\|>$/.exec(prompt);
  const question = [...prompt.matchAll(/What is ([^?]+)\?/g)].pop();
  return tool ? `Answer: ${tool[1]}` : `<|tool_call|>calc ${question?.[1] ?? "1+1"}<|/tool_call|>`;
};

/**
 * While `gate.hang` is set, generations wait until their request is aborted or the gate opens. The
 * follow-up calls (after a tool result) of the programs `gate.hold` matches wait until `gate.release`.
 */
const gate: {
  hang: boolean;
  onHang?: () => void;
  open?: () => void;
  opened: Promise<void>;
  hold?: RegExp;
  held: Set<string>;
  onHeld?: () => void;
  release: Promise<void>;
} = { hang: false, opened: Promise.resolve(), held: new Set(), release: Promise.resolve() };

/** The golden script, held back by `gate` (hanging generations end with "abort" and no tokens). */
const gatedExecutor = (): ScriptedExecutor =>
  new ScriptedExecutor(golden, {
    sequences: 4,
    hold(prompt, req) {
      if (gate.hang) {
        gate.onHang?.();
        return waitOrAbort(gate.opened, req.signal).then(() => true);
      }
      if (req.programId !== undefined && gate.hold?.test(req.programId) && prompt.includes("<|tool|>")) {
        gate.held.add(req.programId);
        gate.onHeld?.();
        return gate.release;
      }
      return undefined;
    },
  });

const dir = mkdtempSync(join(tmpdir(), "arbor-async-"));
// Sandboxes run as uid 65534 when we are root: their root must be reachable by it.
chmodSync(dir, 0o755);
const gguf = join(dir, "policy.gguf");
writeFileSync(gguf, "");
const loads: string[][] = [[], []];
let engines: ListeningEngineServer[] = [];
/** Runs before engine i loads new weights (to hold one engine's switch back). */
let loadHook: ((i: number) => Promise<void>) | undefined;
let gateway: Gateway;
let gatewayUrl: string;
let store: SqliteTrajectoryStore;

beforeAll(async () => {
  engines = await Promise.all(
    [0, 1].map((i) =>
      startEngineServer({
        name: `e${i}`,
        modelPath: gguf,
        policyVersion: 0,
        sequences: 4,
        contextSize: 4096,
        maxWaiting: 16,
        executor: gatedExecutor(),
        loadExecutor: async (path) => {
          await loadHook?.(i);
          (loads[i] as string[]).push(path);
          return gatedExecutor();
        },
      }),
    ),
  );
  store = new SqliteTrajectoryStore(join(dir, "store.sqlite"));
  gateway = createGateway({
    backends: engines.map((e, i) => createArborBackend({ name: `e${i}`, url: `${e.url}/v1` })),
    store,
    auth: { adminToken: ADMIN_TOKEN, requireProgramKeys: true },
  });
  gatewayUrl = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  gate.open?.();
  await gateway?.close();
  await Promise.all(engines.map((e) => e.close()));
  await store?.close();
});

const servedVersion = async (e: ListeningEngineServer): Promise<number> => ((await (await fetch(`${e.url}/v1/policy_version`)).json()) as { policy_version: number }).policy_version;

/** The rollout's options plus the scripted trainer: it gets each batch and publishes a policy, or null (no signal). */
interface LoopTestOptions extends OrchestratedRolloutOptions {
  trainer: (b: TakenBatch) => Promise<{ modelPath: string; version: number } | null>;
  maxTrainerSteps: number;
  inFlight: InFlightOnSwitch;
  /** Called after each weight sync, once every engine serves `version`. */
  onWeightSync?: (version: number) => void;
}

/** runTrainLoop over the orchestrated rollout, the scripted trainer and the engines' weight sync; returns how the rollout ended and the batches taken. */
async function runLoop(o: LoopTestOptions): Promise<RolloutEnd & { batches: TakenBatch[] }> {
  const rollout = new OrchestratedRollout(o);
  const batches: TakenBatch[] = [];
  let version = o.baseVersion ?? 0;
  const source: RolloutSource = {
    next: async () => {
      const b = await rollout.next();
      if (b) batches.push(b);
      return b;
    },
    beginSync: (v) => rollout.beginSync(v),
    published: (v) => rollout.published(v),
    skipped: () => rollout.skipped(),
    finish: (why, err) => rollout.finish(why, err),
  };
  const trainer: Trainer = {
    kind: "reference",
    get version() {
      return version;
    },
    step: async (built) => {
      const p = await o.trainer(batches[batches.length - 1]!);
      if (p !== null) version = p.version;
      const n = built.batch.samples.length;
      return { stepped: p !== null, version, ...(p ? { checkpoint: p.modelPath } : {}), loss: 0, gradNorm: 0, clipFraction: 0, kl: 0, entropy: NaN, samples: n, trainedSamples: n, treeTokens: 0, flatTokens: 0, droppedGroups: 0 };
    },
    close: async () => {},
  };
  const weights = {
    load: async (modelPath: string, v: number) => {
      await loadWeightsEverywhere(o.engines.map((e) => ({ name: e.name, url: engineUrl(e.name) })), modelPath, v, o.inFlight);
      o.onWeightSync?.(v);
    },
  };
  const out = await runTrainLoop({ rollout: source, steps: o.maxTrainerSteps, estimator: "grpo", trainer, weights, exportBatch: jsonlBatchExporter(join(dir, "batches", o.runId), (k) => `b${k}.jsonl`), clock: realClock });
  return { ...out.end, batches };
}

const engineUrl = (name: string): string => engines[Number(name.slice(1))]!.url;

function options(runId: string, root: string, over: Partial<LoopTestOptions>): LoopTestOptions {
  const env = createCalcEnvironment();
  return {
    runId,
    env,
    tasks: env.tasks(8, 5),
    concurrency: 4,
    store,
    sandboxes: createBwrapProvider({ root, limits: { cpuSeconds: 2, memoryMb: 128, wallMs: 5000 } }),
    gatewayUrl,
    gatewayAdminToken: ADMIN_TOKEN,
    model: "arbor-tiny",
    limits: { maxTurns: 3, maxTokensPerCall: 64, maxTotalTokens: 256 },
    temperature: 1,
    reward: (_group, ctx) => createRewardFromConfig({ outcome: 1 }).compute(ctx),
    seed: 1,
    clock: realClock,
    run: { name: runId, configJson: "{}" },
    settings: { mode: "async", groupSize: 2, batchGroups: 2, maxInFlightGroups: 4, window: 3, maxStaleness: 1 },
    rng: new Rng(7),
    engines: engines.map((_, i) => ({ name: `e${i}`, maxActive: 4, kvCapacityTokens: 4 * 4096 })),
    inFlight: "finish",
    trainer: async (b) => ({ modelPath: gguf, version: b.batch.version + 1 }),
    maxTrainerSteps: 3,
    ...over,
  };
}

describe("runTrainLoop (async rollout)", () => {
  it("trains on windowed batches within the staleness bound and syncs every engine after each step", async () => {
    const root = join(dir, "sb-steps");
    const seenAtStep: number[][] = [];
    // Groups 2 and 3 start on version 0 while step 0 trains; their follow-up calls wait for the
    // switch to version 1 and resume on it: their trajectories span two versions.
    let release = (): void => {};
    gate.release = new Promise<void>((resolve) => (release = resolve));
    gate.hold = /^steps\/g[23]\/s/;
    const allHeld = new Promise<void>((resolve) => (gate.onHeld = () => gate.held.size === 4 && resolve()));
    const trainer = async (b: TakenBatch) => {
      // The trainer of step k sees every engine serving the weights of step k − 1.
      seenAtStep.push(await Promise.all(engines.map(servedVersion)));
      if (b.batch.version === 0) await allHeld;
      return { modelPath: gguf, version: b.batch.version + 1 };
    };
    const o = options("steps", root, { trainer, inFlight: "resume", onWeightSync: (v) => v === 1 && release() });
    const out = await runLoop(o).finally(() => {
      gate.hold = undefined;
      release();
    });

    expect(out.stoppedBy).toBe("steps");
    expect(out.batches.map((b) => b.batch.version)).toEqual([0, 1, 2]);
    expect(seenAtStep).toEqual([
      [0, 0],
      [1, 1],
      [2, 2],
    ]);
    expect(out.finalVersion).toBe(3);
    expect(await Promise.all(engines.map(servedVersion))).toEqual([3, 3]);
    expect(loads).toEqual([[gguf, gguf, gguf], [gguf, gguf, gguf]]);

    // No program lost or duplicated: every admitted one ended once, in a batch or left unconsumed.
    const inBatches = out.batches.flatMap((b) => b.groups.flatMap((g) => g.programIds));
    const left = out.unconsumedGroups.flatMap((g) => g.programIds);
    expect(new Set(inBatches).size).toBe(inBatches.length);
    expect(new Set([...inBatches, ...left]).size).toBe(inBatches.length + left.length);
    expect(out.results.map((r) => r.programId).sort()).toEqual([...inBatches, ...left].sort());
    expect(inBatches).toHaveLength(3 * 2 * 2);
    expect((await store.stats("steps")).unfinished).toBe(0);
    expect(readdirSync(root)).toEqual([]);

    // Windowed FIFO: a batch's groups lie within W of the oldest unconsumed group when taken.
    const consumed = new Set<number>();
    for (const b of out.batches) {
      expect(b.batch.groups.length).toBeLessThanOrEqual(2);
      for (const p of b.batch.groups.map((g) => g.position).sort((x, y) => x - y)) {
        let head = 0;
        while (consumed.has(head)) head++;
        expect(p).toBeLessThan(head + 3);
        consumed.add(p);
      }
      // AReaL's η bounds admission; the window lets a group be taken ⌊(W − 2)/B⌋ + 1 steps late.
      expect(b.batch.maxStaleness).toBeLessThanOrEqual(1 + Math.floor((3 - 2) / 2 + 1));
    }

    // Step 1 trains on groups that ran on both versions; later groups waited for version 1 (η = 1).
    expect(out.batches[1]!.batch.groups.flatMap((g) => g.trajectories.map((t) => t.versions.map((s) => s.version)))).toEqual([
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 1],
    ]);
    expect(out.batches[1]!.batch.maxStaleness).toBe(1);
    for (const g of out.batches.flatMap((b) => b.batch.groups)) expect(g.position).toBeLessThan((1 + g.admittedAt + 1) * 2);

    // Versions: each batch trajectory's spans are its calls' recorded versions, token for token.
    for (const b of out.batches) {
      const byId = new Map(b.trajectories.map((t) => [t.program.id, t]));
      for (const g of b.batch.groups) {
        for (const rec of g.trajectories) {
          const t = byId.get(rec.requestId)!;
          expect(t.program.termination?.kind).toBe("completed");
          expect(t.reward?.total).toBe(1);
          expect(t.calls).toHaveLength(2);
          for (const c of t.calls) {
            expect(c.policyVersion).toBeGreaterThanOrEqual(g.admittedAt);
            expect(c.policyVersion).toBeLessThanOrEqual(b.batch.version);
          }
          expect(rec.versions).toEqual(callVersionSpans(t.calls, 0).spans);
          expect(rec.tokens).toBe(t.calls.reduce((n, c) => n + c.outputTokenIds.length, 0));
        }
      }
    }
    expect(out.unreportedTokens).toBe(0);
  }, 60_000);

  it("stops when the dataset is drained, the last batch short", async () => {
    const env = createCalcEnvironment();
    const base = await servedVersion(engines[0]!);
    const out = await runLoop(options("drain", join(dir, "sb-drain"), { tasks: env.tasks(3, 9), baseVersion: base, maxTrainerSteps: 5 }));
    expect(out.stoppedBy).toBe("drained");
    expect(out.batches.map((b) => [b.batch.version, b.groups.length])).toEqual([
      [base, 2],
      [base + 1, 1],
    ]);
    expect(out.unconsumedGroups).toEqual([]);
    expect(out.results).toHaveLength(6);
    expect(out.finalVersion).toBe(base + 2);
    expect(await Promise.all(engines.map(servedVersion))).toEqual([base + 2, base + 2]);
    expect((await store.stats("drain")).unfinished).toBe(0);
  }, 60_000);

  it("a resumed rollout whose run its killed predecessor never created creates it", async () => {
    const env = createCalcEnvironment();
    const base = await servedVersion(engines[0]!);
    const out = await runLoop(options("never-created", join(dir, "sb-never-created"), { tasks: env.tasks(2, 9), baseVersion: base, maxTrainerSteps: 1, reopen: true }));
    expect(out.results.length).toBeGreaterThan(0);
    expect((await store.getRun("never-created"))?.endedAt).toBeDefined();
  }, 60_000);

  it("counts a step whose batch gave nothing to learn from without touching the engines' weights", async () => {
    const base = await servedVersion(engines[0]!);
    let calls = 0;
    const out = await runLoop(
      options("no-signal", join(dir, "sb-no-signal"), {
        baseVersion: base,
        maxTrainerSteps: 2,
        // The first batch has no signal (null); the second publishes a new version.
        trainer: async (b) => (calls++ === 0 ? null : { modelPath: gguf, version: b.batch.version + 1 }),
      }),
    );
    expect(out.stoppedBy).toBe("steps");
    expect(out.batches.map((b) => b.batch.version)).toEqual([base, base]);
    expect(out.finalVersion).toBe(base + 1);
    expect(await Promise.all(engines.map(servedVersion))).toEqual([base + 1, base + 1]);
    expect((await store.stats("no-signal")).unfinished).toBe(0);
  }, 60_000);

  it("reports programs that end while an engine still reloads only once every engine serves the new version", async () => {
    const base = await servedVersion(engines[0]!);
    let release = (): void => {};
    gate.release = new Promise<void>((resolve) => (release = resolve));
    gate.held.clear();
    gate.hold = /^midsync\/g[23]\/s/;
    const allHeld = new Promise<void>((resolve) => (gate.onHeld = () => gate.held.size === 4 && resolve()));
    let heldEnded = (): void => {};
    const allHeldEnded = new Promise<void>((resolve) => (heldEnded = resolve));
    let loading = false;
    const endedWhileLoading: Promise<number[]>[] = [];
    let hooked = false;
    loadHook = async (i) => {
      if (i !== 1 || hooked) return;
      hooked = true;
      // e0 switches first; then the held calls go on (on e0: the new weights; on e1: the old) and
      // their programs end while e1 is still loading.
      while ((await servedVersion(engines[0]!)) !== base + 1) await Promise.resolve();
      loading = true;
      release();
      await allHeldEnded;
      loading = false;
    };
    let endedHeld = 0;
    try {
      const out = await runLoop(
        options("midsync", join(dir, "sb-midsync"), {
          tasks: createCalcEnvironment().tasks(4, 13),
          baseVersion: base,
          concurrency: 8,
          inFlight: "resume",
          settings: { mode: "async", groupSize: 2, batchGroups: 2, maxInFlightGroups: 4 },
          maxTrainerSteps: 2,
          trainer: async (b) => {
            if (b.batch.version === base) await allHeld;
            return { modelPath: gguf, version: b.batch.version + 1 };
          },
          onProgramDone: (r) => {
            if (!/^midsync\/g[23]\//.test(r.programId)) return;
            if (loading) endedWhileLoading.push(store.getTrajectory(r.programId).then((t) => t!.calls.map((c) => c.policyVersion)));
            if (++endedHeld === 4) heldEnded();
          },
        }),
      );
      expect(out.stoppedBy).toBe("steps");
      expect(endedWhileLoading).toHaveLength(4);
      const versionsEndedWhileLoading = await Promise.all(endedWhileLoading);
      // At least one program finished on e0's new weights before e1 served them.
      expect(versionsEndedWhileLoading.some((v) => v.includes(base + 1))).toBe(true);
      for (const g of out.batches[1]!.batch.groups) {
        for (const rec of g.trajectories) {
          const t = out.batches[1]!.trajectories.find((x) => x.program.id === rec.requestId)!;
          expect(rec.versions).toEqual(callVersionSpans(t.calls, 0).spans);
        }
      }
    } finally {
      loadHook = undefined;
      gate.hold = undefined;
      release();
    }
  }, 60_000);

  it("fails clearly when the trainer publishes an old version or an engine refuses, after ending every program", async () => {
    const base = await servedVersion(engines[0]!);
    const o = options("stale", join(dir, "sb-stale"), { baseVersion: base, trainer: async (b) => ({ modelPath: gguf, version: b.batch.version }) });
    await expect(runLoop(o)).rejects.toThrow(`trainer published version ${base}, not newer than ${base}`);
    expect((await store.stats("stale")).unfinished).toBe(0);
    expect((await store.listTrajectories("stale")).every((t) => t.program.termination !== undefined)).toBe(true);
    await expect(loadWeightsEverywhere([{ name: "e1", url: engines[1]!.url }], gguf, base, "finish")).rejects.toThrow(/engine e1 refused version/);
  }, 60_000);

  it("ends every admitted program with an outcome when aborted mid-call", async () => {
    const root = join(dir, "sb-abort");
    const ctl = new AbortController();
    gate.opened = new Promise<void>((resolve) => (gate.open = resolve));
    gate.hang = true;
    gate.onHang = () => ctl.abort(new Error("operator abort"));
    let trained = 0;
    try {
      const out = await runLoop(
        options("abort", root, {
          signal: ctl.signal,
          concurrency: 2,
          settings: { mode: "async", groupSize: 2, batchGroups: 2, maxInFlightGroups: 3 },
          trainer: async () => {
            trained++;
            return { modelPath: gguf, version: 99 };
          },
        }),
      );
      expect(out.stoppedBy).toBe("aborted");
      expect(out.batches).toEqual([]);
      expect(trained).toBe(0);
      // Three groups were admitted (N = 3); two programs were mid-call, four never started.
      expect(out.unconsumedGroups).toHaveLength(3);
      expect(out.results).toHaveLength(6);
      expect(out.results.every((r) => r.termination.kind === "aborted")).toBe(true);
      expect(out.results.filter((r) => r.termination.detail?.startsWith("run aborted before the program started (") === true)).toHaveLength(4);
      expect((await store.stats("abort")).unfinished).toBe(0);
      expect(await store.listTrajectories("abort")).toHaveLength(6);
      expect(readdirSync(root)).toEqual([]);
    } finally {
      gate.hang = false;
      gate.open?.();
    }
  });
});
