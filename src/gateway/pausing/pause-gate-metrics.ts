// Prometheus metrics of the gateway's pause/restore gate (ThunderAgent §B1): what was paused and how,
// what came back, what it saved, and what waits. Registered in the registry the gate is given.
import { Counter, Gauge, type Registry } from "prom-client";
import type { PauseController } from "./pause-controller.js";

/** engine: the engine offloaded/reloaded the program's KV; proxy: the gateway only held its calls. */
export type PauseMode = "engine" | "proxy";

/** The gate's metric set. Names are unique to pausing, so it can share the gateway's registry. */
export class PauseGateMetrics {
  readonly pauses: Counter<"backend" | "mode">;
  readonly restores: Counter<"backend" | "mode">;
  readonly admits: Counter<"backend">;
  readonly forceResumes: Counter;
  readonly engineFailures: Counter<"backend" | "op">;
  readonly heldCallsEnded: Counter<"outcome">;
  readonly recomputeAvoided: Counter;
  readonly kvMoves: Counter<"from" | "to">;
  readonly heldCalls: Gauge;

  constructor(registry: Registry, controller: PauseController, heldNow: () => number) {
    const registers = [registry];
    this.pauses = new Counter({
      name: "arbor_gateway_pauses_total",
      help: "Programs paused, by the backend they were paused on and mode (engine: KV offloaded by the engine; proxy: calls held at the gateway).",
      labelNames: ["backend", "mode"],
      registers,
    });
    this.restores = new Counter({
      name: "arbor_gateway_restores_total",
      help: "Paused programs restored, by target backend and mode (engine: the engine reloads the saved KV; proxy: the next call re-prefills).",
      labelNames: ["backend", "mode"],
      registers,
    });
    this.admits = new Counter({
      name: "arbor_gateway_admits_total",
      help: "New programs whose first call was held for room and then admitted, by backend.",
      labelNames: ["backend"],
      registers,
    });
    this.forceResumes = new Counter({
      name: "arbor_gateway_force_resumes_total",
      help: "Held programs resumed because their oldest call waited past pausing.forceResumeMs (capacity ignored).",
      registers,
    });
    this.engineFailures = new Counter({
      name: "arbor_gateway_pause_engine_failures_total",
      help: "Engine pause/restore calls that failed (the gate fell back to proxy pausing / recompute).",
      labelNames: ["backend", "op"],
      registers,
    });
    this.heldCallsEnded = new Counter({
      name: "arbor_gateway_held_calls_ended_total",
      help: "Calls held at the gateway that stopped being held, by outcome (released, aborted, rejected_full, program_released, closed).",
      labelNames: ["outcome"],
      registers,
    });
    // Definition: for each program whose engine pause AND engine restore both succeeded on the same
    // backend (or whose KV was moved to the backend it was restored on, kvMoves), the controller's context tokens c at pause time (prompt + output of its last call):
    // the prefix of its next call whose KV the engine reloads instead of prefilling again. An upper
    // bound: the engine still re-evaluates the last sampled token, and may have dropped the state
    // under memory pressure without the gateway knowing.
    this.recomputeAvoided = new Counter({
      name: "arbor_gateway_recompute_avoided_tokens_total",
      help: "Context tokens of programs restored from engine-saved KV (not re-prefilled) on the engine that saved it or one it was moved to, counted at restore.",
      registers,
    });
    this.kvMoves = new Counter({
      name: "arbor_gateway_kv_moves_total",
      help: "Paused programs restored on another backend with their KV moved there through a shared tier (the global KV pool), by origin and target.",
      labelNames: ["from", "to"],
      registers,
    });
    this.heldCalls = new Gauge({
      name: "arbor_gateway_held_calls",
      help: "Calls held at the gateway now because their program is paused or waits for room.",
      registers,
      collect() {
        this.set(heldNow());
      },
    });
    // arbor_gateway_programs{state} belongs to the gateway's program table; pausing states get their own name.
    new Gauge({
      name: "arbor_gateway_pausing_programs",
      help: "Programs tracked by the pause controller, by state (active, paused).",
      labelNames: ["state"],
      registers,
      collect() {
        let active = 0;
        let paused = 0;
        for (const p of controller.list()) {
          if (p.state === "active") active++;
          else if (p.state === "paused") paused++;
        }
        this.set({ state: "active" }, active);
        this.set({ state: "paused" }, paused);
      },
    });
    new Gauge({
      name: "arbor_gateway_pausing_usage_tokens",
      help: "Estimated KV usage per backend as the pause check sees it (acting programs decayed, marked programs excluded), tokens.",
      labelNames: ["backend"],
      registers,
      collect() {
        for (const u of controller.usage()) this.set({ backend: u.backend }, u.projectedUsage);
      },
    });
    new Gauge({
      name: "arbor_gateway_pausing_capacity_tokens",
      help: "KV capacity C per backend used by the pause controller, tokens.",
      labelNames: ["backend"],
      registers,
      collect() {
        for (const u of controller.usage()) this.set({ backend: u.backend }, u.capacity);
      },
    });
  }
}
