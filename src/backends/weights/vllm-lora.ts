// Weight sync to an external vLLM server by LoRA adapters: each version is an adapter directory loaded under its own
// name (`arbor-v{N}`) with POST /v1/load_lora_adapter, and the previous one unloaded. Requests must name the new
// adapter (`modelName()`), so in-flight requests finish on the adapter they started with. The server must run with
// --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True (otherwise the routes do not exist: 404). Routes and bodies
// as read in vllm/entrypoints/serve/lora/ and serving_models.py (fixtures/README.md).
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { AdminTransportError, createAdminHttp, type AdminAnswer } from "./admin-http.js";
import type { EngineWeightLoader, InFlightOnSwitch } from "./engine-weights.js";
import { mapPath, type PathMap } from "./path-map.js";

export interface VllmLoraLoaderOptions {
  /** Engine name errors carry. */
  name: string;
  /** The backend url (`http://host:8000/v1` or the server root). */
  url: string;
  /** Limit for each request to the engine, ms (default 2 minutes: an adapter is small). */
  timeoutMs?: number;
  /** Rewrite Arbor's adapter path to the engine's mount of it. */
  pathMap?: PathMap;
  /** Bearer token for the engine's API key, where it has one. */
  apiKey?: string;
  clock?: Clock;
}

/** The adapter name of a version. */
export const loraAdapterName = (version: number): string => `arbor-v${version}`;

/**
 * In-flight handling: an adapter is chosen per request, so an in-flight request cannot move to the new one.
 *   - `abort`  → POST /pause?mode=abort (dev mode), /resume after the load → "abort"; without /pause (404) → "finish";
 *   - `resume`, `finish` → nothing paused → "finish" (in-flight requests end on the adapter they started with).
 */
export function createVllmLoraLoader(opts: VllmLoraLoaderOptions): EngineWeightLoader {
  const { name } = opts;
  const http = createAdminHttp({ name, url: opts.url, timeoutMs: opts.timeoutMs ?? 120_000, apiKey: opts.apiKey, clock: opts.clock });
  let paused = false;
  let current: string | undefined;

  async function listed(adapter: string): Promise<boolean> {
    const a = await http.ok("GET", "/v1/models");
    const data = (a.json as { data?: { id?: unknown }[] } | undefined)?.data ?? [];
    return data.some((m) => m.id === adapter);
  }

  /** POST the load; after a transport failure ask /v1/models first, so an adapter is never loaded twice. */
  async function postLoad(body: { lora_name: string; lora_path: string }): Promise<AdminAnswer | "already"> {
    try {
      return await http.send("POST", "/v1/load_lora_adapter", body);
    } catch (first) {
      if (!(first instanceof AdminTransportError) || first.failure !== "unreachable") throw first;
      try {
        if (await listed(body.lora_name)) return "already";
      } catch {
        throw first;
      }
      return await http.send("POST", "/v1/load_lora_adapter", body);
    }
  }

  async function resume(): Promise<void> {
    if (!paused) return;
    await http.ok("POST", "/resume");
    paused = false;
  }

  return {
    kind: "vllm-lora",
    format: "hf",
    async prepare(requested: InFlightOnSwitch): Promise<InFlightOnSwitch> {
      if (requested !== "abort") return "finish";
      const a = await http.send("POST", "/pause?mode=abort");
      if (a.status === 404) return "finish";
      if (a.status < 200 || a.status >= 300) throw http.refused("POST /pause", a);
      paused = true;
      return "abort";
    },
    async load(path: string, version: number): Promise<void> {
      const adapter = loraAdapterName(version);
      const lora_path = mapPath(name, path, opts.pathMap);
      if (current !== adapter) {
        const a = await postLoad({ lora_name: adapter, lora_path });
        // "already been loaded" (HTTP 400) after a lost answer: confirmed by the model list instead.
        if (a !== "already" && (a.status < 200 || a.status >= 300) && !(await listed(adapter))) {
          const hint = a.status === 404 && typeof (a.json as { error?: unknown } | undefined)?.error !== "object" ? " (runtime LoRA loading needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora on the vLLM server)" : "";
          throw new ArborError(`weight sync: engine ${name} (${opts.url}) refused LoRA adapter ${adapter} from ${lora_path} (HTTP ${a.status}): ${message(a)}${hint}`, "weight_sync");
        }
        const previous = current;
        current = adapter;
        if (previous !== undefined) {
          // Frees the engine's adapter slot (--max-loras); a failure here leaves the new adapter serving.
          await http.send("POST", "/v1/unload_lora_adapter", { lora_name: previous }).catch(() => undefined);
        }
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
    modelName(): string | undefined {
      return current;
    },
  };
}

/** vLLM's ErrorResponse: `{error:{message}}` (current) or `{message}` (before the nested form). */
function message(a: AdminAnswer): string {
  const j = a.json as { error?: { message?: unknown }; message?: unknown; detail?: unknown } | undefined;
  const m = j?.error?.message ?? j?.message ?? j?.detail;
  return typeof m === "string" ? m : a.text.slice(0, 200);
}
