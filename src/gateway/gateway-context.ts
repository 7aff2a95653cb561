// What the gateway's call paths share: the state createGateway builds once and hands to each
// serving module explicitly (no module globals), so every path reads the same tables and metrics.
import type { Backend } from "../backends/backend.js";
import type { Clock } from "../core/clock.js";
import type { TraceSink } from "../core/types.js";
import type { GatewayAuth } from "./auth/gateway-auth.js";
import type { ProgramKeyTable } from "./auth/key-table.js";
import type { ProgramLimiter } from "./auth/program-limiter.js";
import type { DividedRollout } from "./divided/divided-rollout.js";
import type { GatewayMetrics } from "./gateway-metrics.js";
import type { HealthLoop } from "./health/health-loop.js";
import type { HealthMetrics } from "./health/health-metrics.js";
import type { PreparedRequest } from "./openai-request.js";
import type { CallGate } from "./pausing/call-gate.js";
import type { ProgramTable } from "./program-table.js";
import type { PluginRouter } from "./routing/plugin-router.js";
import type { StreamSurface } from "./surfaces/stream-surface.js";
import type { ProgramContext } from "./token-path/context-prompt.js";
import type { MaxTokensPolicy } from "./token-path/max-tokens.js";

export type { RouteRef } from "./call-path.js";

/** How a surface route (messages, responses) writes a streamed answer for the backend that serves it. */
export type SurfaceFactory = (backend: Backend, callId: string) => StreamSurface;

export interface GatewayContext {
  clock: Clock;
  /** Limit for one upstream call, ms. */
  callTimeoutMs: number;
  newCallId: () => string;
  /** Backends in configuration order (error messages list them so). */
  backendList: readonly Backend[];
  backends: ReadonlyMap<string, Backend>;
  router: PluginRouter;
  table: ProgramTable;
  metrics: GatewayMetrics;
  healthMetrics: HealthMetrics;
  health: HealthLoop;
  sink: TraceSink;
  /** False: every call passes through (GatewayOptions.tokenPath). */
  tokenPath: boolean;
  /** A max_tokens larger than the context leaves: clamped or refused (GatewayOptions.maxTokensPolicy). */
  maxTokensPolicy: MaxTokensPolicy;
  /**
   * Each program's last context (prompt + output ids): the prefix its next prompt extends, which is
   * what prefix-aware routing matches against the backends' trees. Dropped on release.
   */
  history: Map<string, number[]>;
  /** Each program's latest recorded call, from which the token path continues (dropped on release). */
  contexts: Map<string, ProgramContext>;
  /** Token-path attempts in flight per backend: aborted (and retried elsewhere) when it goes down. */
  attemptsOn: Map<string, Set<AbortController>>;
  /** The pause gate, when pausing is enabled (it reads backend capacities at start). */
  gateReady: Promise<CallGate> | undefined;
  divided: DividedRollout | null;
  /**
   * The surface routes (messages, responses) name how their streamed answers are written; plain
   * chat and completions streams are relayed as OpenAI chunks.
   */
  streamSurfaces: WeakMap<PreparedRequest, SurfaceFactory>;
  auth: GatewayAuth | undefined;
  keys: ProgramKeyTable;
  limiter: ProgramLimiter;
}
