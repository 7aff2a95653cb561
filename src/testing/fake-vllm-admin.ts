// A fake vLLM server's weight admin routes for tests (no model): the development routes (/pause, /resume,
// /is_paused, /sleep, /wake_up, /is_sleeping, /collective_rpc, /reset_prefix_cache) and the runtime LoRA routes
// (/v1/load_lora_adapter, /v1/unload_lora_adapter, /v1/models), with the query and body fields, response shapes
// and error statuses of vLLM's entrypoints (src/backends/weights/fixtures/README.md); it records what was loaded
// and can refuse a load, hang one, or answer slowly.
import Fastify, { type FastifyReply } from "fastify";
import { realClock } from "../core/real-clock.js";

export interface FakeVllmAdminOptions {
  /** Served model name (--served-model-name). */
  model?: string;
  /** Path the server was started with. */
  modelPath?: string;
  /** VLLM_SERVER_DEV_MODE=1: the development routes exist (else 404). */
  devMode?: boolean;
  /** VLLM_ALLOW_RUNTIME_LORA_UPDATING=True: the LoRA routes exist (else 404). */
  loraUpdating?: boolean;
  /** Delay of each load (reload_weights, load_lora_adapter), ms. */
  loadDelayMs?: number;
  /** --api-key: routes under /v1 want `Authorization: Bearer <key>` (401 otherwise); the admin routes do not. */
  apiKey?: string;
}

export interface FakeVllmAdmin {
  /** Base URL ending in /v1, as backends are configured. */
  readonly url: string;
  /** Every admin request (method and url), in arrival order. */
  readonly log: string[];
  /** Paths the full model was reloaded from, in order. */
  readonly reloads: string[];
  /** Path the base model weights come from now. */
  readonly servedPath: string;
  /** LoRA adapters loaded now: name → path. */
  readonly adapters: ReadonlyMap<string, string>;
  /** LoRA loads accepted, in order. */
  readonly adapterLoads: { lora_name: string; lora_path: string }[];
  readonly paused: false | "abort" | "wait" | "keep";
  /** Tags asleep (empty: awake). */
  readonly asleep: ReadonlySet<string>;
  readonly prefixCacheResets: number;
  /** Fail the next load (reload_weights: HTTP 500; load_lora_adapter: HTTP 400) with this message. */
  failNextLoad(message: string): void;
  /** Never answer loads from now on (until close). */
  hangLoads(): void;
  close(): Promise<void>;
}

const PAUSE_MODES = ["abort", "wait", "keep"] as const;

/** vLLM's ErrorResponse body. */
function errorBody(message: string, type: string, code: number): { error: { message: string; type: string; param: null; code: number } } {
  return { error: { message, type, param: null, code } };
}

/** Start the fake on 127.0.0.1 with an ephemeral port. */
export async function startFakeVllmAdmin(opts: FakeVllmAdminOptions = {}): Promise<FakeVllmAdmin> {
  const model = opts.model ?? "fake-model";
  let configPath = opts.modelPath ?? "/models/base";
  let servedPath = configPath;
  let paused: FakeVllmAdmin["paused"] = false;
  const asleep = new Set<string>();
  let prefixCacheResets = 0;
  let failure: string | undefined;
  let hanging = false;
  const hung: (() => void)[] = [];
  const log: string[] = [];
  const reloads: string[] = [];
  const adapters = new Map<string, string>();
  const adapterLoads: { lora_name: string; lora_path: string }[] = [];

  const app = Fastify({ logger: false, forceCloseConnections: true });
  app.addHook("onRequest", async (req, reply) => {
    log.push(`${req.method} ${req.url}`);
    if (opts.apiKey !== undefined && req.url.startsWith("/v1") && req.headers.authorization !== `Bearer ${opts.apiKey}`) {
      return reply.code(401).send({ error: "Unauthorized" });
    }
  });
  // Routes answering an empty 200 (Response(status_code=200)) accept a body of any type, or none.
  app.addContentTypeParser("*", { parseAs: "string" }, (_req, body, done) => done(null, body));

  async function loadGate(): Promise<"hang" | "go"> {
    if (hanging) {
      await new Promise<void>((resolve) => hung.push(resolve));
      return "hang";
    }
    if (opts.loadDelayMs) await realClock.sleep(opts.loadDelayMs);
    return "go";
  }

  const bad = (reply: FastifyReply, message: string) => reply.code(400).send(errorBody(message, "BadRequestError", 400));

  if (opts.devMode ?? true) {
    app.post("/pause", async (req, reply) => {
      const q = req.query as Record<string, string | undefined>;
      let mode = q.mode ?? "abort";
      if (!(PAUSE_MODES as readonly string[]).includes(mode)) return bad(reply, `mode: Input should be 'abort', 'wait' or 'keep'`);
      if (q.wait_for_inflight_requests === "true") mode = "wait";
      paused = mode as FakeVllmAdmin["paused"];
      return { status: "paused" };
    });
    app.post("/resume", async () => {
      paused = false;
      return { status: "resumed" };
    });
    app.get("/is_paused", async () => ({ is_paused: paused !== false }));

    app.post("/sleep", async (req, reply) => {
      const q = req.query as Record<string, string | undefined>;
      const level = Number(q.level ?? "1");
      // int(level) raises for a non-integer: an unhandled ValueError is HTTP 500.
      if (!Number.isInteger(level)) return reply.code(500).send(errorBody(`invalid literal for int() with base 10: '${q.level}'`, "InternalServerError", 500));
      asleep.add("weights").add("kv_cache");
      return reply.code(200).send();
    });
    app.post("/wake_up", async (req, reply) => {
      const raw = new URL(req.url, "http://x").searchParams.getAll("tags");
      if (raw.length === 0) asleep.clear();
      for (const t of raw) asleep.delete(t);
      return reply.code(200).send();
    });
    app.get("/is_sleeping", async () => ({ is_sleeping: asleep.size > 0 }));

    app.post("/reset_prefix_cache", async (_req, reply) => {
      prefixCacheResets++;
      return reply.code(200).send();
    });

    app.post("/collective_rpc", async (req, reply) => {
      let b: unknown = req.body;
      if (typeof b === "string") {
        try {
          b = JSON.parse(b);
        } catch (e) {
          return bad(reply, `JSON decode error: ${(e as Error).message}`);
        }
      }
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const body: any = b ?? {};
      if (body.method === undefined || body.method === null) return bad(reply, "Missing 'method' in request body");
      const args: unknown[] = body.args ?? [];
      const serverError = (message: string) => reply.code(500).send(errorBody(message, "InternalServerError", 500));
      if (body.method === "update_config") {
        const overrides = args[0];
        if (overrides === null || typeof overrides !== "object") return serverError("'str' object has no attribute 'items'");
        for (const [k, v] of Object.entries(overrides)) {
          if (k !== "load_config" && k !== "model_config") return serverError(`Config \`${k}\` not supported. Allowed configs: {'load_config', 'model_config'}`);
          const m = (v as { model?: unknown }).model;
          if (k === "model_config" && typeof m === "string") configPath = m;
        }
        return { results: [null] };
      }
      if (body.method === "reload_weights") {
        if ((await loadGate()) === "hang") return reply;
        if (asleep.has("weights")) return serverError("Cannot reload weights while the weights are asleep");
        if (failure !== undefined) {
          const message = failure;
          failure = undefined;
          return serverError(message);
        }
        reloads.push(configPath);
        servedPath = configPath;
        return { results: [null] };
      }
      return serverError(`'Worker' object has no attribute '${String(body.method)}'`);
    });
  }

  if (opts.loraUpdating ?? true) {
    const jsonBody = (req: { headers: Record<string, unknown>; body: unknown }): Record<string, unknown> | string => {
      const ct = String(req.headers["content-type"] ?? "").split(";")[0]?.trim()?.toLowerCase();
      if (ct !== "application/json") return "Unsupported Media Type: Only 'application/json' is allowed";
      let b = req.body;
      if (typeof b === "string") {
        try {
          b = JSON.parse(b);
        } catch {
          return "JSON decode error";
        }
      }
      return b !== null && typeof b === "object" && !Array.isArray(b) ? (b as Record<string, unknown>) : "Input should be a valid dictionary";
    };

    app.post("/v1/load_lora_adapter", async (req, reply) => {
      const b = jsonBody(req);
      if (typeof b === "string") return bad(reply, b);
      for (const f of ["lora_name", "lora_path"]) {
        if (typeof b[f] !== "string") return bad(reply, `${f}: Field required`);
      }
      const name = b.lora_name as string;
      const path = b.lora_path as string;
      if (!name || !path) return reply.code(400).send(errorBody("Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput", 400));
      if (adapters.has(name)) return reply.code(400).send(errorBody(`The lora adapter '${name}' has already been loaded.`, "InvalidUserInput", 400));
      if ((await loadGate()) === "hang") return reply;
      if (failure !== undefined) {
        const message = failure;
        failure = undefined;
        return reply.code(400).send(errorBody(message, "BadRequestError", 400));
      }
      adapters.set(name, path);
      adapterLoads.push({ lora_name: name, lora_path: path });
      return reply.code(200).send(`Success: LoRA adapter '${name}' added successfully.`);
    });

    app.post("/v1/unload_lora_adapter", async (req, reply) => {
      const b = jsonBody(req);
      if (typeof b === "string") return bad(reply, b);
      const name = typeof b.lora_name === "string" ? b.lora_name : "";
      if (!name && b.lora_int_id === undefined) return reply.code(400).send(errorBody("either 'lora_name' and 'lora_int_id' needs to be provided.", "InvalidUserInput", 400));
      if (!adapters.has(name)) return reply.code(404).send(errorBody(`The lora adapter '${name}' cannot be found.`, "NotFoundError", 404));
      adapters.delete(name);
      return reply.code(200).send(`Success: LoRA adapter '${name}' removed successfully.`);
    });
  }

  app.get("/v1/models", async () => ({
    object: "list",
    data: [
      { id: model, object: "model", owned_by: "vllm", root: servedPath, parent: null },
      ...[...adapters].map(([id, path]) => ({ id, object: "model", owned_by: "vllm", root: path, parent: model })),
    ],
  }));

  // Starlette's answer for a route that does not exist.
  app.setNotFoundHandler((_req, reply) => reply.code(404).send({ detail: "Not Found" }));

  await app.listen({ host: "127.0.0.1", port: 0 });
  const addr = app.server.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;

  return {
    url: `http://127.0.0.1:${port}/v1`,
    log,
    reloads,
    adapters,
    adapterLoads,
    get servedPath() {
      return servedPath;
    },
    get paused() {
      return paused;
    },
    asleep,
    get prefixCacheResets() {
      return prefixCacheResets;
    },
    failNextLoad(message) {
      failure = message;
    },
    hangLoads() {
      hanging = true;
    },
    async close() {
      for (const r of hung.splice(0)) r();
      await app.close();
    },
  };
}
