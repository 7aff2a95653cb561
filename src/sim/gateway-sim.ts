// A simulated gateway cluster: N cost-model engines (real KV block manager + scheduler) on one
// virtual clock, the real PluginRouter choosing each call's engine from the program's token
// history, and optionally the real PauseController holding and releasing calls. Used by
// `arbor bench pausing` to compare routers with and without ThunderAgent pausing.
import { VirtualClock, type Timer } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { Rng } from "../core/rng.js";
import { CostModelExecutor } from "../engine/costmodel/costmodel-executor.js";
import { getCostProfile } from "../engine/costmodel/profile.js";
import { KvBlockManager } from "../engine/kv/block-manager.js";
import { Scheduler, type FinishedRequest } from "../engine/scheduler/scheduler.js";
import { runUntilIdle, SimEngine } from "../engine/sim-engine.js";
import { PauseController, type PauseAction } from "../gateway/pausing/pause-controller.js";
import type { PauseConfig } from "../gateway/pausing/pause-config.js";
import { PluginRouter, type RouteDecision } from "../gateway/routing/plugin-router.js";
import { createRoutingFilter, createRoutingScorer, resolveRoutingConfig } from "../gateway/routing/registry.js";
import type { RoutingFilter } from "../gateway/routing/types.js";
import type { AgentProgramSpec } from "./agent-workload.js";

const VOCAB = 128_256; // Llama-3
const STOP = 2;

export interface GatewaySimOptions {
  /** Engines in the cluster (named engine-0 … engine-(n−1)). */
  engines: number;
  /** L1 KV capacity of each engine, tokens (rounded down to whole blocks). */
  kvTokensPerEngine: number;
  /** Routing preset name (`routingPresets`: least-load, sticky-program, prefix-affinity, cost-aware, ...). */
  routing: string;
  /** Run the PauseController (true = defaults, or a partial config); false/undefined = no pausing. */
  pausing?: boolean | Partial<PauseConfig>;
  /** Cost profile of every engine. Default llama-3-8b/h100. */
  profile?: string;
  /** How often engine metrics are scraped into the router and KV usage is sampled, ms. Default 1000. */
  scrapeMs?: number;
  seed: number;
}

export interface GatewaySimResult {
  programs: number;
  /** Agent turns (model calls) completed. */
  turns: number;
  /** Clock time when the last program finished, ms. */
  makespanMs: number;
  /** Turns per simulated minute. */
  stepsPerMin: number;
  /** Prompt tokens the engines had to compute at least once: the shared system prompt once, each
   * program's task, every tool output, and the last output token of every non-final turn. */
  uniquePromptTokens: number;
  /** Prompt tokens computed (prefill, recompute after eviction or preemption, engine switches). */
  promptTokensComputed: number;
  /** promptTokensComputed − uniquePromptTokens. */
  recomputeTokens: number;
  preemptions: number;
  /** Per engine: mean fraction of KV blocks in use over the sampled run. */
  meanKvUsage: number[];
  /** max − min of {@link meanKvUsage}. */
  kvImbalance: number;
  /** Mean program latency (finish − arrival), ms. */
  meanProgramLatencyMs: number;
  /** Time calls spent held at the gateway by pausing, summed, ms. */
  heldMs: number;
  pauses: number;
  restores: number;
}

interface EngineNode {
  name: string;
  kv: KvBlockManager;
  scheduler: Scheduler;
  executor: CostModelExecutor;
  engine: SimEngine;
  usageSum: number;
}

interface ProgramState {
  spec: AgentProgramSpec;
  turn: number;
  prompt: number[];
  /** Clock time the current call was held at the gateway, or null. */
  heldSince: number | null;
}

/**
 * Pins a program to the backend the PauseController bound it to (an active program stays on its
 * backend; a restored one goes where the controller put it). Inert for programs without a pin.
 */
function pinFilter(pins: ReadonlyMap<string, string>): RoutingFilter {
  return {
    name: "pause-binding",
    filter: (req, backends) => {
      const pin = pins.get(req.programId);
      return pin === undefined ? [...backends] : backends.filter((b) => b.name === pin);
    },
  };
}

/**
 * Run every program to its last turn on a fresh simulated cluster and return the metrics.
 *
 * With pausing, a "pause" action calls the origin engine scheduler's `pauseProgram(id, "drop")`: the
 * program has no call in flight then (the controller pauses only between calls), so its KV is simply
 * left evictable in the prefix cache; its next call is held at the gateway until a "restore"/"admit"
 * action, and goes to that action's backend (a different engine recomputes the whole context).
 */
export function runGatewaySim(programs: readonly AgentProgramSpec[], o: GatewaySimOptions): GatewaySimResult {
  if (!(Number.isInteger(o.engines) && o.engines >= 1)) throw new ArborError(`gateway sim: engines must be an integer >= 1, got ${o.engines}`, "config");
  if (programs.length === 0) throw new ArborError("gateway sim: the workload has no programs", "config");
  const profile = getCostProfile(o.profile ?? "llama-3-8b/h100");
  const numBlocks = Math.floor(o.kvTokensPerEngine / profile.blockSize);
  if (!(numBlocks >= 1)) throw new ArborError(`gateway sim: kvTokensPerEngine must hold at least one block, got ${o.kvTokensPerEngine}`, "config");
  const capacityTokens = numBlocks * profile.blockSize;
  const scrapeMs = o.scrapeMs ?? 1000;
  const clock = new VirtualClock();
  const rng = new Rng(o.seed);

  const byRequest = new Map<string, { programId: string; routeId: number; engine: EngineNode }>();
  const nodes: EngineNode[] = Array.from({ length: o.engines }, (_, i) => {
    const name = `engine-${i}`;
    const kv = new KvBlockManager({ blockSize: profile.blockSize, numBlocks, enablePrefixCaching: true, bytesPerToken: profile.kvBytesPerToken });
    const scheduler = new Scheduler(
      { maxNumBatchedTokens: 8192, maxNumSeqs: 256, policy: "fcfs", enableChunkedPrefill: true, maxModelLen: capacityTokens, stopTokenIds: [STOP], maxWaiting: 1_000_000 },
      kv,
      clock,
    );
    const executor = new CostModelExecutor(profile, rng.fork(name), { vocabSize: VOCAB, stopTokenIds: [STOP] });
    const node: EngineNode = { name, kv, scheduler, executor, engine: undefined as unknown as SimEngine, usageSum: 0 };
    node.engine = new SimEngine({ scheduler, executor, clock, onFinished: (f) => onFinished(f) });
    return node;
  });
  const nodeByName = new Map(nodes.map((n) => [n.name, n]));
  const names = nodes.map((n) => n.name);

  const pins = new Map<string, string>();
  const preset = resolveRoutingConfig(o.routing);
  const router = new PluginRouter({
    backends: names,
    filters: [pinFilter(pins), createRoutingFilter("healthy"), createRoutingFilter("capacity")],
    scorers: (preset.scorers ?? []).map((s) => ({ scorer: createRoutingScorer(s.name, s.options ?? {}), weight: s.weight ?? 1 })),
  });
  const pausing = o.pausing === undefined || o.pausing === false ? undefined : o.pausing === true ? {} : o.pausing;
  const ctrl = pausing === undefined ? undefined : new PauseController({ clock, backends: names.map((name) => ({ name, capacity: capacityTokens })), config: pausing });

  const states = new Map<string, ProgramState>();
  const pausedOn = new Map<string, EngineNode>();
  const latencies: number[] = [];
  let turns = 0;
  let outputTokens = 0;
  let heldMs = 0;
  let samples = 0;
  let monitor: Timer | null = null;

  const scrape = (): void => {
    for (const n of nodes) {
      const s = n.scheduler.stats();
      const usage = n.kv.usage();
      n.usageSum += usage;
      router.updateMetrics(n.name, { running: s.running, waiting: s.waiting, kvUsage: usage, kvCapacityTokens: capacityTokens, blockSize: profile.blockSize });
    }
    samples++;
  };

  const send = (st: ProgramState, d: RouteDecision): void => {
    const node = nodeByName.get(d.backend) as EngineNode;
    const spec = st.spec.turns[st.turn]!;
    const requestId = `${st.spec.programId}/t${st.turn}`;
    byRequest.set(requestId, { programId: st.spec.programId, routeId: d.id, engine: node });
    node.executor.setOutputLength(requestId, spec.outputLength);
    node.engine.submit({ requestId, promptTokenIds: st.prompt, maxTokens: spec.outputLength, programId: st.spec.programId });
  };

  const routePinned = (st: ProgramState, backend: string): RouteDecision => {
    pins.set(st.spec.programId, backend);
    try {
      return router.route({ programId: st.spec.programId, promptTokens: st.prompt });
    } finally {
      pins.delete(st.spec.programId);
    }
  };

  const hold = (st: ProgramState): void => {
    st.heldSince = clock.now();
  };

  /** A program's next call arrives at the gateway. */
  const call = (st: ProgramState): void => {
    const id = st.spec.programId;
    const len = st.prompt.length;
    if (ctrl === undefined) {
      send(st, router.route({ programId: id, promptTokens: st.prompt }));
      return;
    }
    const row = ctrl.get(id);
    if (row?.state === "active" && row.backend !== null) {
      const d = routePinned(st, row.backend);
      expectGo(ctrl.onCallStart(id, d.backend, len), d.backend, id);
      send(st, d);
    } else if (row !== undefined || ctrl.waitingQueue().length > 0) {
      // Paused, or new behind a non-empty global queue: held without asking the router.
      const dec = ctrl.onCallStart(id, names[0] as string, len);
      if (dec.kind !== "wait") throw new ArborError(`gateway sim: ${id} expected to wait, got go`, "internal");
      hold(st);
    } else {
      // New program: the router's pick places it unless that backend lacks room.
      const d = router.route({ programId: id, promptTokens: st.prompt });
      const dec = ctrl.onCallStart(id, d.backend, len);
      if (dec.kind === "go" && dec.backend === d.backend) {
        send(st, d);
        return;
      }
      router.onFinished(d.id, { outputTokens: 0, ok: false });
      if (dec.kind === "wait") hold(st);
      else send(st, routePinned(st, dec.backend));
    }
  };

  const apply = (actions: readonly PauseAction[]): void => {
    for (const a of actions) {
      const st = states.get(a.programId);
      if (st === undefined) continue; // finished meanwhile
      if (a.kind === "pause") {
        const node = nodeByName.get(a.backend) as EngineNode;
        node.scheduler.pauseProgram(a.programId, "drop");
        pausedOn.set(a.programId, node);
        continue;
      }
      const origin = pausedOn.get(a.programId);
      if (origin !== undefined) {
        origin.scheduler.restoreProgram(a.programId);
        pausedOn.delete(a.programId);
        origin.engine.kick();
      }
      if (a.releasedCalls > 0) {
        if (st.heldSince === null) throw new ArborError(`gateway sim: ${a.programId} released ${a.releasedCalls} call(s) but none is held`, "internal");
        heldMs += clock.now() - st.heldSince;
        st.heldSince = null;
        send(st, routePinned(st, a.backend));
      }
    }
  };

  const onFinished = (f: FinishedRequest): void => {
    const rec = byRequest.get(f.requestId);
    if (rec === undefined) throw new ArborError(`gateway sim: finished request ${f.requestId} was never sent`, "internal");
    byRequest.delete(f.requestId);
    const st = states.get(rec.programId) as ProgramState;
    const spec = st.spec.turns[st.turn]!;
    if (f.finishReason !== "stop" || f.outputTokenIds.length !== spec.outputLength) {
      throw new ArborError(`gateway sim: ${f.requestId} ended with ${f.finishReason} after ${f.outputTokenIds.length} tokens, expected stop after ${spec.outputLength}`, "internal");
    }
    turns++;
    outputTokens += f.outputTokenIds.length;
    router.onFinished(rec.routeId, { outputTokens: f.outputTokenIds });
    const actions = ctrl?.onCallEnd(rec.programId, st.prompt.length + f.outputTokenIds.length) ?? [];
    if (st.turn === st.spec.turns.length - 1) {
      latencies.push(clock.now() - st.spec.arrivalMs);
      states.delete(rec.programId);
      router.releaseProgram(rec.programId);
      ctrl?.onRelease(rec.programId);
      rec.engine.scheduler.endProgram(rec.programId);
      pausedOn.get(rec.programId)?.scheduler.endProgram(rec.programId);
      pausedOn.delete(rec.programId);
      apply(actions);
      if (states.size === 0) {
        ctrl?.stop();
        monitor?.cancel();
      }
      return;
    }
    apply(actions);
    st.prompt = [...st.prompt, ...f.outputTokenIds, ...spec.toolTokens];
    st.turn++;
    clock.setTimer(spec.toolMs, () => call(st));
  };

  let unique = 0;
  for (const p of programs) {
    if (states.has(p.programId)) throw new ArborError(`gateway sim: program id ${p.programId} is used twice`, "config");
    states.set(p.programId, { spec: p, turn: 0, prompt: p.promptTokenIds, heldSince: null });
    unique += p.promptTokenIds.length + p.turns.reduce((s, t) => s + t.toolTokens.length, 0) + p.turns.length - 1;
    clock.setTimer(p.arrivalMs, () => call(states.get(p.programId) as ProgramState));
  }
  unique -= sharedPrefixLength(programs) * (programs.length - 1);

  scrape();
  const loop = (): void => {
    monitor = clock.setTimer(scrapeMs, () => {
      scrape();
      loop();
    });
  };
  loop();
  ctrl?.start(apply);
  runUntilIdle(
    clock,
    nodes.map((n) => n.engine),
  );
  if (latencies.length !== programs.length) {
    throw new ArborError(`gateway sim: ${programs.length - latencies.length} program(s) did not finish`, "internal");
  }

  const computed = nodes.reduce((s, n) => s + n.engine.usage.computedTokens, 0);
  const promptTokensComputed = computed - (outputTokens - turns); // a call's last output token is never fed back
  const makespanMs = clock.now();
  const meanKvUsage = nodes.map((n) => n.usageSum / samples);
  const counters = ctrl?.counters();
  return {
    programs: programs.length,
    turns,
    makespanMs,
    stepsPerMin: turns / (makespanMs / 60_000),
    uniquePromptTokens: unique,
    promptTokensComputed,
    recomputeTokens: promptTokensComputed - unique,
    preemptions: nodes.reduce((s, n) => s + n.scheduler.stats().preemptions, 0),
    meanKvUsage,
    kvImbalance: Math.max(...meanKvUsage) - Math.min(...meanKvUsage),
    meanProgramLatencyMs: latencies.reduce((a, b) => a + b, 0) / latencies.length,
    heldMs,
    pauses: counters?.pauses ?? 0,
    restores: counters?.restores ?? 0,
  };
}

function expectGo(dec: ReturnType<PauseController["onCallStart"]>, backend: string, id: string): void {
  if (dec.kind !== "go" || dec.backend !== backend) {
    throw new ArborError(`gateway sim: bound program ${id} expected to go to ${backend}, got ${JSON.stringify(dec)}`, "internal");
  }
}

/** Leading tokens every program's first prompt shares (the system prompt). */
function sharedPrefixLength(programs: readonly AgentProgramSpec[]): number {
  const first = (programs[0] as AgentProgramSpec).promptTokenIds;
  let n = first.length;
  for (const p of programs) {
    let i = 0;
    while (i < n && p.promptTokenIds[i] === first[i]) i++;
    n = i;
  }
  return n;
}
