// A real llama-server process for integration tests and fixture capture: the binary built by
// scripts/build-llama-server.sh (found as production finds it), started through the production
// process manager on 127.0.0.1 with an ephemeral port and the settings Arbor's own engine agrees with.
import type { Clock } from "../core/clock.js";
import { ManagedLlamaServer } from "../backends/weights/managed-llama-server.js";

export { findLlamaServer, type LlamaServerBinary } from "../backends/llama-server-binary.js";

export interface LlamaServerOptions {
  binary: string;
  modelPath: string;
  /** Server slots (--parallel); each gets contextSize / slots tokens of KV. */
  slots: number;
  /** Total context (--ctx-size), split evenly over the slots. */
  contextSize: number;
  /** Directory for slot save/restore files (--slot-save-path). */
  slotSaveDir: string;
  /** F32 KV cache without flash attention, as Arbor's engine runs, so logprobs agree with it (default true). */
  exactKv?: boolean;
  clock?: Clock;
  /** How long to wait for the model to load (default 60 s). */
  startTimeoutMs?: number;
}

export interface LlamaServer {
  /** http://127.0.0.1:port (no trailing slash). */
  readonly url: string;
  /** The arguments it was started with (for the fixtures README). */
  readonly args: readonly string[];
  /** The last lines the server logged (for failure messages). */
  logTail(): string;
  close(): Promise<void>;
}

/** The test settings as llama-server arguments (after -m, --host, --port and --slot-save-path). */
export function llamaServerTestArgs(opts: Pick<LlamaServerOptions, "slots" | "contextSize" | "exactKv">): string[] {
  return [
    "--threads", "1",
    "--threads-batch", "1",
    "--parallel", String(opts.slots),
    "--ctx-size", String(opts.contextSize),
    "--no-webui",
    "--metrics",
    "--no-warmup",
    // No host-RAM prompt cache: a slot's KV lives only in the slot (and in slot save files), so a
    // paused-and-erased program cannot come back through a side door.
    "--cache-ram", "0",
    ...(opts.exactKv ?? true ? ["--cache-type-k", "f32", "--cache-type-v", "f32", "--flash-attn", "off"] : []),
  ];
}

/**
 * Start llama-server on 127.0.0.1 with an ephemeral port, one thread, no web UI and /metrics on,
 * and resolve once GET /health answers 200 (the model is loaded). Throws ArborError with the
 * server's last log lines when it exits or does not become healthy in time.
 */
export async function startLlamaServer(opts: LlamaServerOptions): Promise<ManagedLlamaServer> {
  return ManagedLlamaServer.start({
    binary: opts.binary,
    modelPath: opts.modelPath,
    slotSaveDir: opts.slotSaveDir,
    extraArgs: llamaServerTestArgs(opts),
    clock: opts.clock,
    startTimeoutMs: opts.startTimeoutMs ?? 60_000,
  });
}
