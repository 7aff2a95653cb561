// A stand-in llama-server program for tests of the process manager and the restart loader where no
// real binary is built: the same command line (-m, --host, --port, --slot-save-path, --parallel), the same
// "listening on" log line, and the routes Arbor uses with llama-server's shapes (/health, /props, /slots,
// /slots/:id?action=save|restore|erase, a /completion that reports how much of the prompt a slot had
// cached). A "model" is a file starting with GGUF whose remaining text names its weights; a file that
// does not start with GGUF, or that contains FAIL, makes it exit 1 as a failed load does; one that contains
// HANG never finishes loading.
// FAKE_LLAMA_IGNORE_SIGTERM=1 makes it ignore SIGTERM (for the SIGKILL path).
// Run as: node --import tsx src/testing/fake-llama-server-main.ts -m model.gguf --port 0 ...
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Fastify from "fastify";
import { realClock } from "../core/real-clock.js";

const argv = process.argv.slice(2);
const arg = (name: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const modelPath = arg("-m") ?? arg("--model") ?? "";
const port = Number(arg("--port") ?? "8080");
const saveDir = arg("--slot-save-path");
const nSlots = Number(arg("--parallel") ?? "1");
const N_CTX = 512;

const readModel = (): string => {
  try {
    return readFileSync(modelPath, "utf8");
  } catch (e) {
    return `unreadable: ${(e as Error).message}`;
  }
};
const text = readModel();
if (text.startsWith("GGUF") && text.includes("HANG")) {
  // A load that never ends (a huge model on a slow disk, a hung device).
  console.error(`srv    load_model: loading model '${modelPath}'`);
  for (;;) await realClock.sleep(60_000);
}
if (!text.startsWith("GGUF") || text.includes("FAIL")) {
  console.error(`llama_model_load: error loading model: invalid magic characters or unsupported tensors (${text.slice(0, 80).trim()})`);
  console.error("srv    load_model: failed to load model, '" + modelPath + "'");
  console.error("srv    operator(): exiting due to model loading error");
  process.exit(1);
}
const weights = text.slice(4).trim();

interface Slot {
  id: number;
  tokens: number[];
  processing: boolean;
  ranTask: boolean;
}
const slots: Slot[] = Array.from({ length: nSlots }, (_, id) => ({ id, tokens: [], processing: false, ranTask: false }));
const error = (code: number, message: string) => ({ error: { code, message, type: code === 400 ? "invalid_request_error" : "server_error" } });

const app = Fastify({ logger: false, forceCloseConnections: true });
app.get("/health", async () => ({ status: "ok" }));
app.get("/props", async () => ({ model_path: modelPath, total_slots: nSlots, default_generation_settings: { n_ctx: N_CTX } }));
app.get("/slots", async () =>
  slots.map((s) => ({ id: s.id, n_ctx: N_CTX, is_processing: s.processing, ...(s.ranTask ? { n_prompt_tokens: s.tokens.length } : {}) })),
);
app.post("/completion", async (req, reply) => {
  const body = req.body as { prompt: number[]; id_slot?: number; hold_ms?: number };
  const slot = slots[body.id_slot ?? 0];
  if (!slot) return reply.code(400).send(error(400, "Invalid slot ID"));
  slot.processing = true;
  let common = 0;
  while (common < slot.tokens.length && common < body.prompt.length && slot.tokens[common] === body.prompt[common]) common++;
  // llama-server evaluates the last prompt token again to get its logits.
  const cached = Math.min(common, body.prompt.length - 1);
  slot.tokens = [...body.prompt];
  slot.ranTask = true;
  if (body.hold_ms) await realClock.sleep(body.hold_ms);
  slot.processing = false;
  return { content: weights, id_slot: slot.id, tokens_cached: body.prompt.length, timings: { cache_n: cached, prompt_n: body.prompt.length - cached } };
});
app.post("/slots/:id", async (req, reply) => {
  if (!saveDir) return reply.code(501).send(error(501, "This server does not support slots action. Start it with `--slot-save-path`"));
  const slot = slots[Number((req.params as { id: string }).id)];
  if (!slot) return reply.code(400).send(error(400, "Invalid slot ID"));
  const action = (req.query as { action?: string }).action;
  const filename = (req.body as { filename?: string } | undefined)?.filename ?? "";
  if (action !== "erase" && (!filename || filename.includes("/"))) return reply.code(400).send(error(400, "Invalid filename"));
  if (action === "save") {
    writeFileSync(join(saveDir, filename), JSON.stringify({ weights, tokens: slot.tokens }));
    return { id_slot: slot.id, filename, n_saved: slot.tokens.length, n_written: 16 * slot.tokens.length, timings: { save_ms: 0.1 } };
  }
  if (action === "restore") {
    try {
      const saved = JSON.parse(readFileSync(join(saveDir, filename), "utf8")) as { tokens: number[] };
      slot.tokens = saved.tokens;
    } catch {
      slot.tokens = [];
      return reply.code(400).send(error(400, "Unable to restore slot: No available space in KV cache or invalid slot save file"));
    }
    return { id_slot: slot.id, filename, n_restored: slot.tokens.length, n_read: 16 * slot.tokens.length, timings: { restore_ms: 0.1 } };
  }
  if (action === "erase") {
    const n = slot.tokens.length;
    slot.tokens = [];
    return { id_slot: slot.id, n_erased: n };
  }
  return reply.code(400).send(error(400, "Invalid action"));
});

process.on("SIGTERM", () => {
  if (process.env.FAKE_LLAMA_IGNORE_SIGTERM === "1") {
    console.error("srv    signal: ignoring SIGTERM");
    return;
  }
  void app.close().then(() => process.exit(0));
});

await app.listen({ host: "127.0.0.1", port });
const addr = app.server.address();
if (!addr || typeof addr === "string") throw new Error("fake llama-server: no TCP address");
console.error(`main: model loaded (${weights})`);
console.error(`main: listening on http://127.0.0.1:${addr.port}`);
