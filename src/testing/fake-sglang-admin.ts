// A fake SGLang server's weight admin routes for tests (no model): /update_weights_from_disk, /pause_generation,
// /continue_generation, /get_weight_version and /get_model_info, with the request fields, response shapes and
// error statuses of SGLang's http_server.py and io_struct.py (src/backends/weights/fixtures/README.md), recording
// what was loaded; it can refuse a load, hang one, or answer slowly.
import Fastify from "fastify";
import { realClock } from "../core/real-clock.js";

export interface FakeSglangAdminOptions {
  /** The path the server was started with (--model-path). */
  modelPath?: string;
  /** --weight-version at start (SGLang's default is "default"). */
  weightVersion?: string | null;
  /** Serve GET /get_weight_version (servers before it report the version in /get_model_info only). */
  weightVersionRoute?: boolean;
  /** Delay of each load, ms. */
  loadDelayMs?: number;
  /** Serve /pause_generation and /continue_generation (older servers have neither). */
  pauseRoutes?: boolean;
  /** --api-key: every route wants `Authorization: Bearer <key>` (401 otherwise). */
  apiKey?: string;
}

/** One accepted /update_weights_from_disk request. */
export interface SglangLoad {
  model_path: string;
  load_format: string | null;
  abort_all_requests: boolean;
  weight_version: string | null;
}

export interface FakeSglangAdmin {
  /** Base URL ending in /v1, as backends are configured. */
  readonly url: string;
  /** Loads that succeeded, in order. */
  readonly loads: SglangLoad[];
  /** Every admin request (method and path), in arrival order. */
  readonly log: string[];
  readonly modelPath: string;
  readonly weightVersion: string | null;
  /** Whether generation is paused, and in which mode. */
  readonly paused: false | "abort" | "retract" | "in_place";
  /** Refuse the next load with `success: false` and this message (HTTP 400, as SGLang). */
  failNextLoad(message: string): void;
  /** Never answer loads from now on (until close). */
  hangLoads(): void;
  /** Close the connection of the next load without an answer, before or after applying it (a lost answer). */
  dropNextLoad(when: "before" | "after"): void;
  close(): Promise<void>;
}

const PAUSE_MODES = ["abort", "retract", "in_place"] as const;

/** SGLang's validation error body (RequestValidationError turned into HTTP 400). */
function validationError(message: string): { object: string; message: string; type: string; param: null; code: number } {
  return { object: "error", message, type: "Bad Request", param: null, code: 400 };
}

/** Start the fake on 127.0.0.1 with an ephemeral port. */
export async function startFakeSglangAdmin(opts: FakeSglangAdminOptions = {}): Promise<FakeSglangAdmin> {
  let modelPath = opts.modelPath ?? "/models/base";
  let weightVersion: string | null = opts.weightVersion === undefined ? "default" : opts.weightVersion;
  let paused: FakeSglangAdmin["paused"] = false;
  let failure: string | undefined;
  let hanging = false;
  let drop: "before" | "after" | undefined;
  const hung: (() => void)[] = [];
  const loads: SglangLoad[] = [];
  const log: string[] = [];

  const app = Fastify({ logger: false, forceCloseConnections: true });
  app.addHook("onRequest", async (req, reply) => {
    log.push(`${req.method} ${req.url}`);
    if (opts.apiKey !== undefined && req.headers.authorization !== `Bearer ${opts.apiKey}`) return reply.code(401).send({ error: "Unauthorized" });
  });

  app.post("/update_weights_from_disk", async (req, reply) => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const b: any = req.body;
    if (b === null || typeof b !== "object" || Array.isArray(b)) return reply.code(400).send(validationError("Input should be an object"));
    if (typeof b.model_path !== "string") return reply.code(400).send(validationError("model_path: Field required"));
    for (const f of ["load_format", "weight_version"]) {
      if (b[f] !== undefined && b[f] !== null && typeof b[f] !== "string") return reply.code(400).send(validationError(`${f}: Input should be a valid string`));
    }
    for (const f of ["abort_all_requests", "is_async", "torch_empty_cache", "keep_pause", "recapture_cuda_graph", "flush_cache"]) {
      if (b[f] !== undefined && typeof b[f] !== "boolean") return reply.code(400).send(validationError(`${f}: Input should be a valid boolean`));
    }
    if (hanging) return new Promise<void>((resolve) => hung.push(resolve));
    if (opts.loadDelayMs) await realClock.sleep(opts.loadDelayMs);
    const dropNow = drop;
    drop = undefined;
    if (dropNow === "before") {
      reply.hijack();
      req.raw.socket.destroy();
      return;
    }
    if (failure !== undefined) {
      const message = failure;
      failure = undefined;
      return reply.code(400).send({ success: false, message, num_paused_requests: 0 });
    }
    const load: SglangLoad = {
      model_path: b.model_path,
      load_format: b.load_format ?? null,
      abort_all_requests: b.abort_all_requests ?? false,
      weight_version: b.weight_version ?? null,
    };
    loads.push(load);
    modelPath = load.model_path;
    let message = "Succeeded to update model weights.";
    if (load.weight_version !== null) {
      weightVersion = load.weight_version;
      message += ` Weight version updated to ${load.weight_version}.`;
    }
    if (dropNow === "after") {
      reply.hijack();
      req.raw.socket.destroy();
      return;
    }
    return { success: true, message, num_paused_requests: 0 };
  });

  if (opts.pauseRoutes ?? true) {
    app.post("/pause_generation", async (req, reply) => {
      // The route takes a PauseGenerationReqInput body: FastAPI requires one (an empty object selects the defaults).
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const b: any = req.body;
      if (b === null || typeof b !== "object" || Array.isArray(b)) return reply.code(400).send(validationError("body: Field required"));
      const mode = b.mode ?? "abort";
      if (!PAUSE_MODES.includes(mode)) return reply.code(400).send(validationError(`Invalid mode: '${String(mode)}'. Expected one of ['abort', 'retract', 'in_place'].`));
      paused = mode;
      return { message: "Generation paused successfully.", status: "ok" };
    });

    app.post("/continue_generation", async (req, reply) => {
      const b: unknown = req.body;
      if (b === null || typeof b !== "object" || Array.isArray(b)) return reply.code(400).send(validationError("body: Field required"));
      paused = false;
      return { message: "Generation continued successfully.", status: "ok" };
    });
  }

  if (opts.weightVersionRoute ?? true) app.get("/get_weight_version", async () => ({ weight_version: weightVersion }));

  app.get("/get_model_info", async () => ({
    model_path: modelPath,
    tokenizer_path: modelPath,
    is_generation: true,
    preferred_sampling_params: null,
    weight_version: weightVersion,
  }));

  // Starlette's answer for a route that does not exist.
  app.setNotFoundHandler((_req, reply) => reply.code(404).send({ detail: "Not Found" }));

  await app.listen({ host: "127.0.0.1", port: 0 });
  const addr = app.server.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;

  return {
    url: `http://127.0.0.1:${port}/v1`,
    loads,
    log,
    get modelPath() {
      return modelPath;
    },
    get weightVersion() {
      return weightVersion;
    },
    get paused() {
      return paused;
    },
    failNextLoad(message) {
      failure = message;
    },
    hangLoads() {
      hanging = true;
    },
    dropNextLoad(when) {
      drop = when;
    },
    async close() {
      for (const r of hung.splice(0)) r();
      await app.close();
    },
  };
}
