// Weight sync to an external vLLM server by reloading the full model from an HF directory through vLLM's
// development routes (VLLM_SERVER_DEV_MODE=1; routes read in vllm/entrypoints/serve/, fixtures/README.md):
// pause generation where asked, optionally sleep and wake the weights, point the workers' model config at the new
// directory and reload (POST /collective_rpc update_config, then reload_weights), wake the KV cache, reset the
// prefix cache (it holds KV of the old weights) and resume. vLLM reports no Arbor version: `servedVersion` is null
// and the caller records the version it loaded.
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { errorDetail } from "../engine-http.js";
import { createAdminHttp, type AdminAnswer } from "./admin-http.js";
import type { EngineWeightLoader, InFlightOnSwitch } from "./engine-weights.js";
import { mapPath, type PathMap } from "./path-map.js";

export interface VllmReloadLoaderOptions {
  /** Engine name errors carry. */
  name: string;
  /** The backend url (`http://host:8000/v1` or the server root). */
  url: string;
  /** Limit for each request to the engine, ms (a reload reads the whole checkpoint: default 10 minutes). */
  timeoutMs?: number;
  /** Rewrite Arbor's checkpoint path to the engine's mount of it. */
  pathMap?: PathMap;
  /**
   * Sleep level to pass through around the reload (1: weights offloaded to CPU and KV cache discarded; 2: both
   * discarded), freeing GPU memory while the new weights load; undefined: no sleep (the default).
   */
  sleepLevel?: 1 | 2;
  /** Bearer token for the engine's API key, where it has one. */
  apiKey?: string;
  clock?: Clock;
}

/**
 * In-flight handling, from vLLM's `POST /pause?mode=` (PauseMode):
 *   - `abort`  → /pause?mode=abort: in-flight requests are aborted → "abort";
 *   - `resume` → /pause?mode=keep: requests stay frozen in the scheduler and go on after /resume, on the new
 *                weights → "resume"; with `sleepLevel` set the sleep discards their KV cache, so it falls back to
 *                "abort";
 *   - `finish` → nothing paused, the caller drains → "finish".
 * A server without /pause (dev mode off, or vLLM before pause/resume) answers 404: the loader falls back to "finish".
 */
export function createVllmReloadLoader(opts: VllmReloadLoaderOptions): EngineWeightLoader {
  const { name } = opts;
  const http = createAdminHttp({ name, url: opts.url, timeoutMs: opts.timeoutMs ?? 600_000, apiKey: opts.apiKey, clock: opts.clock });
  let paused = false;
  let sleeping = false;
  let loaded: { path: string; version: number } | undefined;

  /** One collective RPC of the load; a failure names the version, the directory and the engine's message. */
  const rpc = async (method: string, args: unknown[], modelPath: string, version: number): Promise<AdminAnswer> => {
    const a = await http.send("POST", "/collective_rpc", { method, args });
    if (a.status < 200 || a.status >= 300) {
      throw new ArborError(
        `weight sync: engine ${name} (${opts.url}) refused loading version ${version} from ${modelPath}: collective_rpc ${method} answered HTTP ${a.status}: ${errorDetail(a.text)}` +
          (a.status === 404 ? " (the development routes need VLLM_SERVER_DEV_MODE=1 on the vLLM server)" : ""),
        "weight_sync",
      );
    }
    return a;
  };

  async function resume(): Promise<void> {
    if (sleeping) {
      await http.ok("POST", "/wake_up");
      sleeping = false;
    }
    if (paused) {
      await http.ok("POST", "/resume");
      paused = false;
    }
  }

  async function reload(modelPath: string, version: number): Promise<void> {
    if (opts.sleepLevel !== undefined) {
      await http.ok("POST", `/sleep?level=${opts.sleepLevel}`);
      sleeping = true;
      // Weights first: reload_weights writes into the weight buffers, which must exist again.
      await http.ok("POST", "/wake_up?tags=weights");
    }
    // update_config replaces the workers' ModelConfig (its `model` is the directory reload_weights reads).
    await rpc("update_config", [{ model_config: { model: modelPath } }], modelPath, version);
    await rpc("reload_weights", [], modelPath, version);
    if (opts.sleepLevel !== undefined) {
      await http.ok("POST", "/wake_up?tags=kv_cache");
      sleeping = false;
    }
    await http.ok("POST", "/reset_prefix_cache");
  }

  return {
    kind: "vllm-reload",
    format: "hf",
    async prepare(requested: InFlightOnSwitch): Promise<InFlightOnSwitch> {
      if (requested === "finish") return "finish";
      const applied: InFlightOnSwitch = opts.sleepLevel !== undefined ? "abort" : requested;
      const a = await http.send("POST", `/pause?mode=${applied === "abort" ? "abort" : "keep"}`);
      if (a.status === 404) return "finish";
      if (a.status < 200 || a.status >= 300) throw http.refused("POST /pause", a);
      paused = true;
      return applied;
    },
    async load(path: string, version: number): Promise<void> {
      const modelPath = mapPath(name, path, opts.pathMap);
      // Idempotent: the same version from the same directory is not reloaded.
      if (loaded?.version !== version || loaded.path !== modelPath) {
        loaded = undefined;
        await reload(modelPath, version);
        loaded = { path: modelPath, version };
      }
      await resume();
    },
    async recover(): Promise<void> {
      try {
        await resume();
      } catch {
        // best effort: the caller takes an engine that stays paused out of rotation
      }
    },
    async servedVersion(): Promise<number | null> {
      return null;
    },
  };
}
