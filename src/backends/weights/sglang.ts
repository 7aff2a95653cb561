// Weight sync to an external SGLang server through its own admin API (routes and bodies as read in SGLang's
// http_server.py and io_struct.py; fixtures/README.md names the files and commits): pause generation where asked,
// POST /update_weights_from_disk with the HF directory and the version as `weight_version`, continue generation,
// and confirm with GET /get_weight_version (GET /get_model_info on servers without that route).
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { AdminTransportError, createAdminHttp, type AdminAnswer } from "./admin-http.js";
import type { EngineWeightLoader, InFlightOnSwitch } from "./engine-weights.js";
import { mapPath, type PathMap } from "./path-map.js";

export interface SglangWeightLoaderOptions {
  /** Engine name errors carry. */
  name: string;
  /** The backend url (`http://host:30000/v1` or the server root). */
  url: string;
  /** Limit for each request to the engine, ms (a load reads the whole checkpoint: default 10 minutes). */
  timeoutMs?: number;
  /** Rewrite Arbor's checkpoint path to the engine's mount of it. */
  pathMap?: PathMap;
  /** `load_format` sent with each load; omitted by default (the server's own --load-format applies). */
  loadFormat?: string;
  /** Bearer token for the engine's API key, where it has one. */
  apiKey?: string;
  clock?: Clock;
}

/**
 * SGLang's in-flight handling, from `PauseGenerationReqInput.mode`:
 *   - `abort`  → POST /pause_generation {mode:"abort"}: in-flight requests end aborted → mode "abort";
 *   - `resume` → POST /pause_generation {mode:"retract"}: running requests go back to the waiting queue, their KV
 *                cache is dropped and recomputed on the new weights after /continue_generation → mode "resume"
 *                ("in_place" would keep KV computed by the old weights, and flush_cache fails while it holds any);
 *   - `finish` → nothing is paused: the caller drains → mode "finish".
 * SGLang up to 0.5.5 takes no body on /pause_generation and always aborts; there `resume` behaves as `abort`.
 * A server without /pause_generation (404) falls back to "finish" (the update itself waits for running requests).
 */
export function createSglangWeightLoader(opts: SglangWeightLoaderOptions): EngineWeightLoader {
  const { name } = opts;
  const http = createAdminHttp({ name, url: opts.url, timeoutMs: opts.timeoutMs ?? 600_000, apiKey: opts.apiKey, clock: opts.clock });
  let paused = false;

  async function continueGeneration(): Promise<void> {
    await http.ok("POST", "/continue_generation", {}, "POST /continue_generation");
    paused = false;
  }

  async function reportedVersion(): Promise<number | null> {
    let a = await http.send("GET", "/get_weight_version");
    // Servers before /get_weight_version report the version in /get_model_info only.
    if (a.status === 404) a = await http.send("GET", "/get_model_info");
    if (a.status === 404) return null;
    if (a.status < 200 || a.status >= 300) throw http.refused("GET weight version", a);
    return parseVersion((a.json as { weight_version?: unknown } | undefined)?.weight_version);
  }

  /** POST the load; after a transport failure (no answer at all) ask the version first, so a load is never sent twice. */
  async function postLoad(body: object, version: number): Promise<AdminAnswer | "already"> {
    try {
      return await http.send("POST", "/update_weights_from_disk", body);
    } catch (first) {
      if (!(first instanceof AdminTransportError) || first.failure !== "unreachable") throw first;
      let served: number | null;
      try {
        served = await reportedVersion();
      } catch {
        throw first;
      }
      if (served === version) return "already";
      return await http.send("POST", "/update_weights_from_disk", body);
    }
  }

  return {
    kind: "sglang",
    format: "hf",
    async prepare(requested: InFlightOnSwitch): Promise<InFlightOnSwitch> {
      if (requested === "finish") return "finish";
      const mode = requested === "abort" ? "abort" : "retract";
      const a = await http.send("POST", "/pause_generation", { mode });
      // Servers before /pause_generation: nothing to pause with, the caller drains.
      if (a.status === 404) return "finish";
      if (a.status < 200 || a.status >= 300) throw http.refused(`POST /pause_generation (mode ${mode})`, a);
      paused = true;
      return requested;
    },
    async load(path: string, version: number): Promise<void> {
      const modelPath = mapPath(name, path, opts.pathMap);
      // Idempotent: an engine that already reports this version is not loaded again.
      if ((await reportedVersion()) !== version) {
        const body = {
          model_path: modelPath,
          ...(opts.loadFormat !== undefined ? { load_format: opts.loadFormat } : {}),
          abort_all_requests: false,
          weight_version: String(version),
        };
        const a = await postLoad(body, version);
        if (a !== "already") {
          const j = a.json as { success?: unknown; message?: unknown } | undefined;
          if (a.status < 200 || a.status >= 300 || j?.success !== true) {
            const msg = typeof j?.message === "string" ? j.message : a.text.slice(0, 200);
            throw new ArborError(`weight sync: engine ${name} (${opts.url}) refused loading version ${version} from ${modelPath} (HTTP ${a.status}): ${msg}`, "weight_sync");
          }
        }
      }
      if (paused) await continueGeneration();
      const now = await reportedVersion();
      if (now !== null && now !== version) {
        throw new ArborError(`weight sync: engine ${name} reports weight_version ${now} after loading version ${version}`, "weight_sync");
      }
    },
    async recover(): Promise<void> {
      if (!paused) return;
      try {
        await continueGeneration();
      } catch {
        // best effort: the caller takes an engine that stays paused out of rotation
      }
    },
    servedVersion: reportedVersion,
  };
}

/** SGLang's weight_version is a free string; Arbor sends integers, anything else is "no Arbor version". */
function parseVersion(v: unknown): number | null {
  if (typeof v === "number" && Number.isInteger(v)) return v;
  if (typeof v === "string" && /^-?\d+$/.test(v.trim())) return Number(v.trim());
  return null;
}
